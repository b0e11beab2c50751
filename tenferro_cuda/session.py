"""The CUDA execution session: the one object with the authority to run work on a GPU.

- Not constructible by users (``CudaExecSession()`` raises TypeError); obtained from
  ``cuda_exec_session(device)`` (a context manager) or ``with_cuda_exec_session(fn)``.
- Thread-affine: every method called from another thread raises RuntimeStateError.
- Scoped: after its ``with`` block the session and everything it lent (raw session,
  kernel session, stream handle, modules) raise RuntimeStateError.
- Entry pushes the runtime's primary context; exit restores exactly the caller's context
  (body returned or raised). A second session for the same runtime on the same thread
  while one is open raises SessionEntryError(kind="reentered").
- Success of an op means its work is enqueued on the session stream; ``synchronize()``
  and ``download_to_host`` are the only host barriers.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from . import _context, _driver, nvtx
from .debug import allow_host_sync
from .errors import SessionEntryError, ValidationError
from .ops import SessionOps
from .runtime import (
    AllocationDomainId,
    Capability,
    CudaDeviceInfo,
    CudaRuntime,
    CudaRuntimeIdentity,
    error_message,
)

__all__ = ["CudaExecSession", "cuda_exec_session", "with_cuda_exec_session"]
R = TypeVar("R")
_TOKEN = object()


class Scope:
    """Liveness flag shared by a session and everything it lends."""

    __slots__ = ("alive",)

    def __init__(self) -> None:
        self.alive = True


class CudaExecSession(SessionOps):
    """Borrowed CUDA execution capability for one thread and one scope."""

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("CudaExecSession is not constructible; use "
                        "tenferro_cuda.cuda_exec_session(device) or with_cuda_exec_session(fn)")

    @classmethod
    def _open(cls, runtime: CudaRuntime, token: object) -> CudaExecSession:
        if token is not _TOKEN:
            raise TypeError("CudaExecSession is not constructible")
        self = object.__new__(cls)
        self._rt = runtime
        self._state = runtime.thread_state()
        self._thread = threading.get_ident()
        self._scope = Scope()
        return self

    # --- identity and facts --------------------------------------------------------------
    def runtime(self) -> CudaRuntime:
        self._begin("runtime")
        return self._rt

    def runtime_identity(self) -> CudaRuntimeIdentity:
        self._begin("runtime_identity")
        return self._rt.identity

    def device_info(self) -> CudaDeviceInfo:
        self._begin("device_info")
        return self._rt.info

    def allocation_domain(self) -> AllocationDomainId:
        self._begin("allocation_domain")
        return self._rt.domain

    def supports(self, capability: Capability | str) -> bool:
        """Answer from device and library queries (see ``capabilities.py``)."""
        from .capabilities import supports

        self._begin("supports")
        return supports(self._rt, Capability(capability))

    def ensure_gpu_resident(self, tensor, op: str) -> None:
        """Raise RuntimeStateError naming ``op`` unless ``tensor`` lives on this runtime."""
        self._begin(op)
        self._resident(tensor, op)

    @property
    def stream_handle(self) -> int:
        """The raw CUstream value of the session stream (for timing and interop)."""
        self._begin("stream_handle")
        return int(self._state.stream)

    def memory_stats(self) -> dict:
        self._begin("memory_stats")
        return self._rt.pool.stats()

    def release_cached_memory(self) -> None:
        """Return the pool's cached (freed) memory to the driver; waits for pending frees."""
        self._begin("release_cached_memory")
        with allow_host_sync():
            self._rt.release_cached_memory()

    def set_memory_limit(self, limit: int | None) -> None:
        """Bound the bytes live in this runtime's pool (None: no bound)."""
        self._begin("set_memory_limit")
        if limit is not None and limit < 0:
            raise ValidationError(f"limit must be >= 0 or None (got {limit})",
                                  op="set_memory_limit")
        self._rt.pool.limit = limit

    # --- barriers ------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Block until the session stream is idle; raise deferred device errors."""
        op = "synchronize"
        state = self._begin(op)
        self._flush()
        _driver.memcpy_dtoh_async(state.err_host, state.err_word.ptr, 4, state.stream, op)
        with allow_host_sync():
            _driver.stream_synchronize(state.stream, op)
        code = int.from_bytes(_read_host(state.err_host, 4), "little", signed=True)
        if code:
            _driver.memset_d8_async(state.err_word.ptr, 0, 4, state.stream, op)
            with allow_host_sync():
                _driver.stream_synchronize(state.stream, op)
            raise ValidationError(f"deferred device error: {error_message(code)}",
                                  op=error_message(code).rsplit(" in ", 1)[-1],
                                  kind="device_data")

    def _flush(self) -> None:
        pending = self._state.pending
        while pending:
            pending.pop(0)()

    # --- sub-sessions --------------------------------------------------------------------
    def with_raw(self, op: str, fn: Callable[..., R]) -> R:
        """Run ``fn(raw_session)`` under the extension protocol (DESIGN 3.1)."""
        with self.raw(op) as raw:
            return fn(raw)

    @contextlib.contextmanager
    def raw(self, op: str) -> Iterator:
        from .raw import RawSession

        self._begin(op)
        stream = self._state.stream  # 1. the session stream of the calling thread
        self._flush()  # 2. pending work is enqueued before raw code runs
        saved = _context.enter(self._rt.context, op)  # 3.-4. save, push primary
        scope = Scope()
        try:
            yield RawSession._make(self, stream, scope, op)  # 5.
        finally:
            scope.alive = False
            _context.restore(saved, self._rt.context, op)  # 6. best effort, never raises

    def with_kernels(self, op: str, fn: Callable[..., R]) -> R:
        """Run ``fn(kernel_session)``; pending work is flushed on entry and exit."""
        with self.kernels(op) as ks:
            return fn(ks)

    @contextlib.contextmanager
    def kernels(self, op: str) -> Iterator:
        from .kernel_session import KernelSession

        self._begin(op)
        self._flush()
        saved = _context.enter(self._rt.context, op)
        scope = Scope()
        try:
            yield KernelSession._make(self, scope, op)
        finally:
            scope.alive = False
            try:
                self._flush()
            finally:
                _context.restore(saved, self._rt.context, op)

    def __repr__(self) -> str:
        state = "open" if self._scope.alive else "closed"
        return f"<CudaExecSession device={self._rt.ordinal} {state}>"


if nvtx.enabled():
    nvtx.instrument(CudaExecSession)


def _read_host(address: int, n: int) -> bytes:
    import ctypes

    return ctypes.string_at(address, n)


@contextlib.contextmanager
def cuda_exec_session(device: int = 0) -> Iterator[CudaExecSession]:
    """Open the execution session of ``device`` for the calling thread."""
    op = "cuda_exec_session"
    runtime = CudaRuntime.get(device)
    runtime.check_alive(op)
    state = runtime.thread_state()
    if state.session_open:
        raise SessionEntryError(
            f"a session for device {device} is already open on this thread; "
            "use that session instead of entering a second one", op=op, kind="reentered")
    saved = _context.enter(runtime.context, op)
    state.session_open = True
    try:
        session = CudaExecSession._open(runtime, _TOKEN)
    except BaseException:
        state.session_open = False
        _context.restore(saved, runtime.context, op)
        raise
    try:
        yield session
    finally:
        session._scope.alive = False
        state.session_open = False
        try:
            while state.pending:
                state.pending.pop(0)()
        finally:
            _context.restore(saved, runtime.context, op)


def with_cuda_exec_session(fn: Callable[[CudaExecSession], R], device: int = 0) -> R:
    """Call ``fn(session)`` inside ``cuda_exec_session(device)`` and return its result."""
    with cuda_exec_session(device) as session:
        return fn(session)
