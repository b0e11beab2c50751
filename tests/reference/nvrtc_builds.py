"""NVRTC builds of the CPU tier's compile tests: each compiled once per pytest run, ahead of
the tests that check it, in worker processes beside the rest of the tier.

NVRTC serialises the compiles of one process, and compiling every registered
instantiation for sm_80 and sm_90 is most of the tier's time, so the builds run in
``os.cpu_count()`` spawned processes while the main process runs other tests. A compile
test names its program (``family_build``: what ``compile_family`` gives with an empty
cache; ``nvrtc_build`` / ``source_build``: one ``_nvrtc.compile_program`` call on a
family's source or a generated one, with the options the test chooses) and reads it with
``get``. The tests that check that every instantiation compiles add ``CHECK``
(``--Ofast-compile=mid``): NVRTC's front end, code generation and ptxas for the arch run
as always, with less optimisation, in 40 % of the time; a test that inspects optimised
code (PTX loads, stack frames) compiles with the library's own options. Decorating the
test with ``ahead(fn)``, where ``fn(**params)`` gives the builds of one parametrisation,
lets ``tests/cpu/conftest.py`` start them as soon as collection ends (``prefetch``), in
the order of the tests; a build that was not prefetched is compiled on request, in the
test's own process. Either way a build is compiled once, and the test sees the same
program and the same errors.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from tenferro_cuda import _nvrtc
from tenferro_cuda.kernels.registry import family

__all__ = ["Build", "family_build", "check_build", "nvrtc_build", "source_build", "ahead",
           "prefetch", "get", "shutdown"]


CHECK = ("--Ofast-compile=mid",)


@dataclass(frozen=True)
class Build:
    """One NVRTC program: a registered family through ``compile_cached`` (``source`` None,
    ``options`` the extra options), or ``source`` through ``_nvrtc.compile_program`` with
    ``options``."""

    name: str  # the family, or the source's file name
    expressions: tuple[str, ...]
    arch: int
    options: tuple[str, ...] = ()
    source: str | None = None
    ptx: bool = False
    op: str = ""


def family_build(name: str, expressions: Iterable[str], arch: int,
                 extra: Iterable[str] = ()) -> Build:
    """What ``compile_family(name, expressions, arch)`` gives with an empty cache (with
    ``extra`` options added, as ``compile_cached`` adds them)."""
    return Build(name, tuple(expressions), arch, tuple(extra))


def check_build(name: str, arch: int) -> Build:
    """What the compile checks compile: every registered instantiation of family ``name``
    for ``arch``, with ``CHECK``."""
    return family_build(name, family(name).all_expressions(), arch, CHECK)


def nvrtc_build(name: str, expressions: Iterable[str], options: Iterable[str], *,
                ptx: bool = False, arch: int = 0) -> Build:
    """A compile of family ``name``'s source with exactly ``options``."""
    fam = family(name)
    return Build(fam.source, tuple(expressions), arch, tuple(options), fam.read_source(), ptx,
                 f"compile:{name}")


def source_build(source_name: str, source: str, expressions: Iterable[str],
                 options: Iterable[str], *, ptx: bool = False, arch: int = 0) -> Build:
    """A compile of ``source`` (generated code) with exactly ``options``."""
    return Build(source_name, tuple(expressions), arch, tuple(options), source, ptx)


def compile_build(build: Build) -> _nvrtc.CompiledProgram:
    """Compile ``build`` here (in a worker, or in the test's process)."""
    if build.source is None:
        from tenferro_cuda.kernels.cache import KernelCache
        from tenferro_cuda.kernels.compiler import compile_cached, compile_family

        with tempfile.TemporaryDirectory(prefix="tenferro-build-") as tmp:
            cache = KernelCache(Path(tmp))
            if not build.options:
                return compile_family(build.name, build.expressions, build.arch, cache=cache)
            fam = family(build.name)
            return compile_cached(fam.read_source(), fam.source, build.expressions,
                                  build.arch, build.options, cache=cache,
                                  op=f"compile:{build.name}")
    return _nvrtc.compile_program(build.source, build.name, build.options, build.expressions,
                                  op=build.op, ptx=build.ptx)


def ahead(builds_of: Callable[..., Build | list[Build]]):
    """Mark a test whose parametrisation ``params`` needs ``builds_of(**params)`` (the
    arguments ``builds_of`` names are taken from the test's parameters)."""

    def mark(test):
        test.nvrtc_builds_of = builds_of
        return test

    return mark


_pool: ProcessPoolExecutor | None = None
_futures: dict[Build, Future] = {}
_done: dict[Build, _nvrtc.CompiledProgram] = {}


def prefetch(builds: Iterable[Build]) -> int:
    """Start compiling ``builds`` (in order, each once) in worker processes; how many."""
    global _pool
    todo = [b for b in dict.fromkeys(builds) if b not in _futures and b not in _done]
    if not todo:
        return 0
    if _pool is None:
        # spawn: the test process may hold threads (and a CUDA context on a GPU host)
        _pool = ProcessPoolExecutor(max_workers=os.cpu_count() or 1,
                                    mp_context=multiprocessing.get_context("spawn"))
    for build in todo:
        _futures[build] = _pool.submit(compile_build, build)
    return len(todo)


def get(build: Build) -> _nvrtc.CompiledProgram:
    """The program of ``build``: the prefetched one, else compiled now (once)."""
    prog = _done.get(build)
    if prog is None:
        fut = _futures.pop(build, None)
        try:
            prog = fut.result() if fut is not None else compile_build(build)
        except BrokenProcessPool:  # a worker died (killed, out of memory): compile here
            prog = compile_build(build)
        _done[build] = prog
    return prog


def shutdown() -> None:
    """Drop the builds nobody asked for and stop the workers (end of the run)."""
    global _pool
    pool, _pool = _pool, None
    if pool is None:
        return
    for fut in _futures.values():
        fut.cancel()
    if any(not fut.done() for fut in _futures.values()):
        # A run stopped early (-x, ^C) leaves builds running: end them rather than wait
        # for NVRTC (the executor has no public way to stop a running worker).
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
    pool.shutdown(wait=True, cancel_futures=True)
    _futures.clear()
    _done.clear()
