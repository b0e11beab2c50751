"""The host emulation of CUDA built-ins under which the CPU tier runs real kernels of
``ptx/``: the kernel sources are compiled by the host C++ compiler (``build``) against
``SHIM`` (``cuda_emu.h``), and called through ``extern "C"`` wrappers that a test writes.

Every CUDA thread of a block is a fiber (``ucontext``) on the calling OS thread. A fiber
runs until it waits at a barrier that other threads have yet to reach; then the next
fiber runs, round robin, in thread order on every other launch and in reverse order on
the others (so that a read that lacks a barrier before it sees stale data whichever
thread writes). ``__syncthreads`` is a block barrier; each warp has its own barrier
(``emu_warp``), behind which the warp built-ins exchange values through ``emu_xchg``. A
round in which no fiber reaches a barrier or ends means a thread missed a barrier: the
run aborts with a message rather than hang. Every thread runs the blocks of the grid in
order, with a block barrier after each. Shared memory is ``static`` (an ``extern
__shared__`` array is ``emu_dynamic_smem``: ``DYNAMIC_SHARED``), device memory is host
memory: alignment, vector paths and barriers run exactly as written.
``emu_call(kernel, params)`` calls a kernel with a ``cuLaunchKernel``-style parameter
array, each parameter read at the type of the kernel's own signature. The four PTX
conversions of types.cuh (float16, bfloat16) are replaced by correctly rounded C++ ones
(``PTX_CONVERSIONS``), and the ``_rz`` conversions round toward zero.

Builds are slow (seconds), so a test module may declare its builds with ``ahead``;
``tests/cpu/conftest.py`` starts those of the selected modules when collection ends
(``start_ahead``), one at a time on a background thread, and ``build`` then waits for
its own (or compiles it at once if it has not started).
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from tenferro_cuda.kernels.compiler import headers_digest
from tenferro_cuda.kernels.registry import INCLUDE_DIR, PTX_DIR

__all__ = ["SHIM", "PTX_CONVERSIONS", "DYNAMIC_SHARED", "build", "launchers", "ahead",
           "start_ahead", "shutdown"]

SHIM = Path(__file__).with_name("cuda_emu.h").read_text()

# (header of ptx/include/tenferro, text, replacement): the inline PTX that the host
# compiler cannot take, and ewkernel.cuh's extern __shared__ array
PTX_CONVERSIONS = (
    ("types.cuh", 'asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));',
     "f = emu_f16_to_f32(h.bits);"),
    ("types.cuh", 'asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));',
     "h.bits = emu_f32_to_f16(f);"),
    ("types.cuh", 'asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h.bits) : "d"(d));',
     "h.bits = emu_f64_to_f16(d);"),
    ("types.cuh", 'asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));',
     "b.bits = emu_f32_to_bf16(f);"),
)
DYNAMIC_SHARED = (("ewkernel.cuh",
                   "extern __shared__ __align__(16) unsigned char tf_ew_smem[];",
                   "unsigned char* const tf_ew_smem = emu_dynamic_smem;"),)


class _Job:
    """One library to build: its directory, the command, and (once run) the outcome."""

    def __init__(self, name: str, wrappers: str, shim_extra: str = "",
                 sources: tuple[str, ...] = (),
                 overrides: tuple[tuple[str, str, str], ...] = (),
                 optimize: str = "-O1") -> None:
        self.shim, self.wrappers = SHIM + shim_extra, wrappers
        self.edits, self.optimize = (*PTX_CONVERSIONS, *overrides), optimize
        parts = [self.shim, wrappers, headers_digest(), repr(self.edits), optimize]
        parts += [(PTX_DIR / f).read_text() for f in sources]
        digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
        self.dir = _root() / f"{name}_{digest}"
        self.out = self.dir / f"lib{name}.so"
        self.state = "new"  # then "queued" (by start_ahead), "running"; done: the event
        self.proc: subprocess.Popen | None = None
        self.done = threading.Event()
        self.returncode, self.stderr = -1, ""

    def run(self, cxx: str) -> None:
        """Write the sources and compile (the library appears only when complete)."""
        d = self.dir
        try:
            d.mkdir(exist_ok=True)
            (d / "shim.h").write_text(self.shim)
            # quoted includes look beside the including header: copy all of them
            shutil.copytree(INCLUDE_DIR / "tenferro", d / "tenferro", dirs_exist_ok=True)
            for header, text, replacement in self.edits:
                path = d / "tenferro" / header
                assert text in path.read_text(), f"{header} no longer holds {text!r}"
                path.write_text(path.read_text().replace(text, replacement))
            (d / "emu.cpp").write_text(self.wrappers)
            part = d / "part.so"
            command = [cxx, "-std=c++17", self.optimize, "-shared", "-fPIC", "-w", f"-I{d}",
                       f"-I{INCLUDE_DIR}", f"-I{PTX_DIR}", str(d / "emu.cpp"), "-o",
                       str(part)]
            for attempt in range(3):  # a process that could not be started is tried again
                try:
                    self.proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                                 stderr=subprocess.PIPE, text=True)
                    break
                except OSError:  # e.g. EAGAIN/EFAULT from the spawn on a loaded machine
                    if attempt == 2:
                        raise
                    time.sleep(0.5 * (attempt + 1))
            assert self.proc is not None
            self.stderr = self.proc.communicate()[1]
            self.returncode = self.proc.returncode
            if self.returncode == 0:
                part.rename(self.out)
        except Exception as exc:  # noqa: BLE001 - reported by build()
            self.returncode, self.stderr = -1, repr(exc)
        finally:
            self.done.set()


_state: dict = {"root": None, "thread": None}
_lock = threading.Lock()
_queue: list[_Job] = []  # started ahead, not yet running
_jobs: dict[Path, _Job] = {}  # every job by directory
_ahead: dict[str, list[Callable[[], dict]]] = {}


def _root() -> Path:
    if _state["root"] is None:
        _state["root"] = Path(tempfile.mkdtemp(prefix="tenferro-emu-"))
        atexit.register(shutil.rmtree, _state["root"], True)
    return _state["root"]


def _compiler() -> str | None:
    return shutil.which("g++") or shutil.which("clang++")


def build(name: str, wrappers: str, shim_extra: str = "", sources: tuple[str, ...] = (),
          overrides: tuple[tuple[str, str, str], ...] = (),
          optimize: str = "-O1") -> ctypes.CDLL:
    """The library of ``wrappers`` (C++ that includes ``"shim.h"`` and kernel sources of
    ``ptx/``) compiled against ``SHIM + shim_extra``; built once per content and pytest
    run (``sources``: the ``ptx/`` files it includes, part of the content). The build
    reads a copy of the headers of ``ptx/include/tenferro`` with the edits
    ``PTX_CONVERSIONS`` and ``overrides`` made: (header, text, replacement) each.
    ``optimize``: the compiler's level (``-O0`` compiles many kernels that run little
    three times faster). Skips the test when no host C++ compiler is found."""
    cxx = _compiler()
    if cxx is None:
        pytest.skip("no host C++ compiler for the kernel emulation")
    job = _Job(name, wrappers, shim_extra, sources, overrides, optimize)
    with _lock:
        job = _jobs.setdefault(job.dir, job)
        mine = job.state in ("new", "queued")
        if job.state == "queued":
            _queue.remove(job)
        job.state = "running"
    if mine:  # not started yet: compile it here rather than wait for the others
        job.run(cxx)
    job.done.wait()
    if job.returncode and "unrecognized" in job.stderr:
        pytest.skip(f"{cxx} cannot build the emulation: {job.stderr[:200]}")
    assert job.returncode == 0, job.stderr[-4000:]
    return ctypes.CDLL(str(job.out))


def launchers(expressions: Iterable[str]) -> str:
    """``extern "C" void w<i>(params, gx, gy, gz, bx, by)``: run the kernel named by
    expression ``i`` on that grid with a ``cuLaunchKernel``-style parameter array."""
    return "\n".join(
        f'extern "C" void w{i}(void** a, unsigned gx, unsigned gy, unsigned gz, unsigned bx, '
        f"unsigned by) {{ emu_launch(gx, gy, gz, bx, by, [&] {{ emu_call(&{e}, a); }}); }}"
        for i, e in enumerate(expressions))


def ahead(module: str, *builds: Callable[[], dict]) -> None:
    """Declare the builds of test module ``module``: each callable gives ``build``'s
    keyword arguments."""
    _ahead.setdefault(module, []).extend(builds)


def start_ahead(modules: Iterable[str]) -> None:
    """Queue the declared builds of ``modules`` and start compiling them in order."""
    cxx = _compiler()
    if cxx is None:
        return
    for module in dict.fromkeys(modules):
        for kwargs in _ahead.get(module, ()):
            job = _Job(**kwargs())
            with _lock:
                if job.dir not in _jobs:
                    _jobs[job.dir] = job
                    job.state = "queued"
                    _queue.append(job)
    with _lock:
        if _queue and _state["thread"] is None:
            _state["thread"] = threading.Thread(target=_work, args=(cxx,), daemon=True,
                                                name="cuda-emu-builds")
            _state["thread"].start()


def _work(cxx: str) -> None:
    while True:
        with _lock:
            if not _queue:
                _state["thread"] = None
                return
            job = _queue.pop(0)
            job.state = "running"
        job.run(cxx)


def shutdown() -> None:
    """Drop the builds not started yet and stop the running ones (end of the run)."""
    with _lock:
        for job in _queue:
            job.state, job.returncode, job.stderr = "running", -1, "not built: the run ended"
            job.done.set()
        _queue.clear()
        running = [j.proc for j in _jobs.values() if j.proc is not None]
    for proc in running:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
