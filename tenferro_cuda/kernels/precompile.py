"""Compile registered kernel instantiations into the kernel cache, with progress.

``plan`` lists the work: one instantiation of every ``ptx/`` family per arch (what the
install check ``python -m tenferro_cuda`` does by default), or every instantiation
(``--all``, and ``tools/precompile.py`` behind ``make precompile``). Each instantiation is
its own NVRTC program, the unit ``CudaRuntime.function`` looks up, so what is compiled
here is what later processes read from the disk cache. ``run`` compiles a plan and counts
what NVRTC compiled and what the cache already had. NVRTC serialises the compiles of one
process (threads do not help), so ``workers > 1`` means worker processes.

``Progress`` shows a bar when its stream is a terminal and ``tqdm`` is installed (the
optional ``progress`` extra); otherwise it writes a plain line every ``EVERY_S`` seconds
and one at the end.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TextIO

from ..errors import ValidationError
from .compiler import warm_family
from .registry import family, family_names

__all__ = ["Job", "Tally", "Progress", "check_archs", "plan", "run"]
EVERY_S = 5.0  # seconds between plain progress lines


@dataclass(frozen=True)
class Job:
    """One instantiation (an NVRTC name expression) of a family, for one arch."""

    family: str
    expression: str
    arch: int


@dataclass(frozen=True)
class Tally:
    """What ``run`` did: ``compiled`` by NVRTC plus ``cached`` (already in the cache)."""

    kernels: int
    compiled: int
    cached: int
    families: int
    archs: tuple[int, ...]
    seconds: float


def plan(archs: Sequence[int], *, every: bool = False,
         names: Sequence[str] | None = None) -> list[Job]:
    """The jobs for ``archs``: the first instantiation of each family (``every``: all of
    them), for the families ``names`` (default: every registered family), arch by arch."""
    known = family_names()
    chosen = tuple(dict.fromkeys(names)) if names else known
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise ValidationError(f"no kernel family {', '.join(map(repr, unknown))} (known: "
                              f"{', '.join(known)})", op="precompile")
    jobs = []
    for arch in check_archs(archs):
        for name in chosen:
            exprs = family(name).all_expressions()
            jobs += [Job(name, e, arch) for e in (exprs if every else exprs[:1])]
    return jobs


def check_archs(archs: Sequence[int]) -> tuple[int, ...]:
    """``archs`` without repeats; ValidationError unless one or more ints >= 50."""
    bad = [a for a in archs if isinstance(a, bool) or not isinstance(a, int) or a < 50]
    if bad or not archs:
        raise ValidationError(f"archs must be one or more ints >= 50, like 90 for sm_90 "
                              f"(got {list(archs)!r})", op="precompile")
    return tuple(dict.fromkeys(archs))


def _build(job: Job) -> bool:
    return warm_family(job.family, (job.expression,), job.arch)


class Progress:
    """Progress of ``total`` kernels: a ``tqdm`` bar on a terminal when tqdm is installed,
    else a plain line every ``every_s`` seconds and one when the last kernel is done."""

    def __init__(self, total: int, stream: TextIO | None = None, label: str = "kernels",
                 every_s: float = EVERY_S):
        self.stream = stream if stream is not None else sys.stderr
        self.total, self.label, self.every_s = total, label, every_s
        self.done = self.compiled = 0
        self.start = self.last = time.perf_counter()
        self.bar: Any = None
        isatty = getattr(self.stream, "isatty", None)
        if isatty is not None and isatty():
            try:
                from tqdm import tqdm  # type: ignore[import-untyped]
            except ImportError:
                pass
            else:
                self.bar = tqdm(total=total, desc=label, unit="kernel", file=self.stream)

    def update(self, compiled: bool) -> None:
        """One more kernel done (``compiled`` by NVRTC, else from the cache)."""
        self.done += 1
        self.compiled += bool(compiled)
        if self.bar is not None:
            self.bar.set_postfix_str(f"{self.compiled} compiled", refresh=False)
            self.bar.update(1)
            return
        now = time.perf_counter()
        if self.done == self.total or now - self.last >= self.every_s:
            self.last = now
            self.stream.write(f"{self.label}: {self.done}/{self.total} ({self.compiled} "
                              f"compiled, {self.done - self.compiled} from the cache, "
                              f"{now - self.start:.1f} s)\n")
            self.stream.flush()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run(jobs: Sequence[Job], *, workers: int = 1, progress: Progress | None = None) -> Tally:
    """Compile ``jobs`` into the kernel cache (``workers`` processes when more than one);
    the first compile error is raised once the running jobs end (the rest are dropped)."""
    if workers < 1:
        raise ValidationError(f"workers must be >= 1 (got {workers!r})", op="precompile")
    start = time.perf_counter()
    compiled = 0

    def done(was_compiled: bool) -> None:
        nonlocal compiled
        compiled += was_compiled
        if progress is not None:
            progress.update(was_compiled)

    try:
        if workers == 1 or len(jobs) <= 1:
            for job in jobs:
                done(_build(job))
        else:
            _run_pool(jobs, workers, done)
    finally:
        if progress is not None:
            progress.close()
    return Tally(len(jobs), compiled, len(jobs) - compiled, len({j.family for j in jobs}),
                 tuple(dict.fromkeys(j.arch for j in jobs)), time.perf_counter() - start)


def _run_pool(jobs: Sequence[Job], workers: int, done) -> None:
    # spawn: the caller may hold threads or a CUDA context, which fork would copy badly
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=context) as pool:
        pending = {pool.submit(_build, job) for job in jobs}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for fut in finished:
                if fut.exception() is not None:
                    for other in pending:
                        other.cancel()
                    raise fut.exception()  # type: ignore[misc]
                done(fut.result())
