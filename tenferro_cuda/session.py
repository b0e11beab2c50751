"""The CUDA execution session: the one object with the authority to run work on a GPU.

- Not constructible by users (``CudaExecSession()`` raises TypeError); obtained from
  ``cuda_exec_session(device)`` (a context manager) or ``with_cuda_exec_session(fn)``.
  Copying, deep-copying or pickling it (or anything it lends) raises TypeError.
- Thread-affine: every method called from another thread raises RuntimeStateError.
- Scoped: after its ``with`` block the session and everything it lent (raw session,
  kernel session, stream handle, modules) raise RuntimeStateError.
- Entry pushes the runtime's primary context; exit restores the caller's whole context
  stack exactly, whatever the body did (``exec/guard.py``). An op that finds another
  context current pushes ours and pops it again. A second session for the same runtime on
  the same thread while one is open raises SessionEntryError(kind="reentered").
- Success of an op means its work is enqueued on the session stream; ``synchronize()``
  and ``download_to_host`` are the only host barriers.

The session is a facade: each op method is made by ``exec/entry.op_method`` from the op
family's function (``_session_ops.py``), and the methods here cover identity, barriers and
the two sub-sessions.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from . import _foreign, nvtx
from ._session_ops import SessionOps
from .authority import Authority, Scope
from .errors import SessionEntryError, ValidationError
from .exec import entry
from .exec.context import ExecContext
from .exec.guard import ScopeGuard
from .exec.residency import resident
from .graph import CaptureScope
from .memory import relieve
from .raw import StreamHandle
from .runtime import (
    AllocationDomainId,
    CudaDeviceInfo,
    CudaRuntime,
    CudaRuntimeIdentity,
    GpuExtensionCapability,
    error_message,
)

__all__ = ["CudaExecSession", "cuda_exec_session", "with_cuda_exec_session"]
R = TypeVar("R")
_TOKEN = object()


@entry.register_session_type
class CudaExecSession(SessionOps, Authority):
    """Borrowed CUDA execution capability for one thread and one scope."""

    __slots__ = ("_rt", "_ctx", "_scope")
    _rt: CudaRuntime
    _ctx: ExecContext
    _scope: Scope

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("CudaExecSession is not constructible; use "
                        "tenferro_cuda.cuda_exec_session(device) or with_cuda_exec_session(fn)")

    @classmethod
    def _open(cls, runtime: CudaRuntime, ctx: ExecContext, token: object) -> CudaExecSession:
        if token is not _TOKEN:
            raise TypeError("CudaExecSession is not constructible")
        self = object.__new__(cls)
        self._rt, self._ctx, self._scope = runtime, ctx, Scope("session")
        return self

    # --- identity and facts --------------------------------------------------------------
    def runtime(self) -> CudaRuntime:
        """The runtime of this session's device (shared by the device's sessions)."""
        entry.check(self, "runtime")
        return self._rt

    def runtime_identity(self) -> CudaRuntimeIdentity:
        """Device ordinal, UUID, serial and process of the runtime."""
        entry.check(self, "runtime_identity")
        return self._rt.identity

    def device_info(self) -> CudaDeviceInfo:
        """Immutable facts about the device (name, compute capability, memory, limits)."""
        entry.check(self, "device_info")
        return self._rt.info

    def allocation_domain(self) -> AllocationDomainId:
        """The allocation domain tensors of this runtime belong to."""
        entry.check(self, "allocation_domain")
        return self._rt.domain

    def supports(self, capability: GpuExtensionCapability | str,
                 peer: CudaExecSession | int | None = None) -> bool:
        """Answer from device and library queries (see ``capabilities.py``).

        With ``peer`` (a session or a device ordinal), ``PEER_COPY`` is answered for that
        pair of devices: whether copies between them go directly both ways
        (``cuDeviceCanAccessPeer``); False for this session's own device. Without it,
        ``PEER_COPY`` says whether some other device is a peer of this one."""
        from .capabilities import peer_copy_with, supports

        op = "supports"
        entry.check(self, op)
        try:
            cap = GpuExtensionCapability(capability)
        except (ValueError, TypeError):
            names = ", ".join(repr(c.value) for c in GpuExtensionCapability)
            raise ValidationError(f"unknown capability {capability!r:.80} (one of {names})",
                                  op=op) from None
        if peer is None:
            return supports(self._rt, cap)
        if cap is not GpuExtensionCapability.PEER_COPY:
            raise ValidationError(f"peer applies to PEER_COPY only (got {cap.name})", op=op)
        if isinstance(peer, CudaExecSession):
            peer = entry.check(peer, op).ordinal
        return peer_copy_with(self._rt, peer, op)

    def ensure_gpu_resident(self, tensor: object, op: str) -> None:
        """Raise RuntimeStateError naming ``op`` unless ``tensor`` lives on this runtime
        and this thread's stream (it never transfers)."""
        resident(entry.check(self, op, "ensure_gpu_resident"), tensor, op)

    @property
    def stream_handle(self) -> int:
        """The raw CUstream value of the session stream (for timing and interop)."""
        return int(entry.check(self, "stream_handle").stream)

    @property
    def stream(self) -> StreamHandle:
        """The session stream as a stream object (``__cuda_stream__`` protocol, ``int()``),
        valid on this thread while the session is open; pass it to cuda.core, to every
        tenferro API that takes a stream, or ``int(s.stream)`` to PyTorch's
        ``torch.cuda.ExternalStream``."""
        return StreamHandle(entry.check(self, "stream").stream, self._scope, "session stream")

    def memory_stats(self) -> dict:
        """Live, recycled and reserved bytes of the runtime's pool, and its limit."""
        entry.check(self, "memory_stats")
        relieve()  # (exports whose consumer let go count as freed)
        return self._rt.pool.stats()

    def release_cached_memory(self) -> None:
        """Return the pool's cached (freed) memory to the driver; waits for pending frees."""
        entry.check(self, "release_cached_memory")
        relieve()
        self._rt.release_cached_memory()

    def set_memory_limit(self, limit: int | None) -> None:
        """Bound the bytes live in this runtime's pool (None: no bound)."""
        entry.check(self, "set_memory_limit")
        if limit is not None and (type(limit) is not int or limit < 0):
            raise ValidationError(f"limit must be an int >= 0 or None (got {limit!r})",
                                  op="set_memory_limit")
        self._rt.pool.limit = limit

    # --- barriers ------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Block until the session stream is idle; raise deferred device errors."""
        entry.enter(self, "synchronize", _synchronize, ())

    def capture(self) -> CaptureScope:
        """Record the session's work into a CUDA graph: ``with s.capture() as g: ...``,
        then ``g.replay()`` (docs/graphs.md)."""
        entry.check(self, "capture")
        return CaptureScope(self)

    # --- sub-sessions --------------------------------------------------------------------
    def with_raw(self, op: str, fn: Callable[..., R]) -> R:
        """Run ``fn(raw_session)`` under the extension protocol (DESIGN 3.1)."""
        with self.raw(op) as raw:
            return fn(raw)

    def raw(self, op: str) -> _SubScope:
        """The raw sub-session as a context manager: ``with s.raw(op) as raw: ...``."""
        _check_op_name(op, "raw")
        entry.check(self, op, "raw")
        return _SubScope(self, op, kernels=False)

    def with_kernels(self, op: str, fn: Callable[..., R]) -> R:
        """Run ``fn(kernel_session)``; pending work is flushed on entry and exit."""
        with self.kernels(op) as ks:
            return fn(ks)

    def kernels(self, op: str) -> _SubScope:
        """The kernel sub-session as a context manager: ``with s.kernels(op) as ks: ...``."""
        _check_op_name(op, "kernels")
        entry.check(self, op, "kernels")
        return _SubScope(self, op, kernels=True)

    def __repr__(self) -> str:
        state = "open" if self._scope.alive else "closed"
        return f"<CudaExecSession device={self._rt.ordinal} {state}>"


def _check_op_name(op: object, method: str) -> None:
    """A sub-session's ``op`` is the name every error of it carries: a str."""
    if not isinstance(op, str):
        raise ValidationError(f"op must be a str naming the extension's operation (got "
                              f"{type(op).__name__})", op=method)


def _synchronize(ctx: ExecContext) -> None:
    op = "synchronize"
    ctx.flush()
    errors = ctx.errors
    count = errors.count
    code = 0
    if count == errors.read:  # no launch since the last read could have written the word
        ctx.wait(op)
    else:
        ctx.download(ctx.err_host, ctx.err_word.ptr, 4, op)
        ctx.wait(op)
        errors.read = count
        code = int.from_bytes(_read_host(ctx.err_host, 4), "little", signed=True)
    if _foreign._parked:  # the stream is idle: foreign arrays dropped while it ran go now
        _foreign.drain()
    if code:
        ctx.memset(ctx.err_word.ptr, 0, 4, op)
        ctx.wait(op)
        raise ValidationError(f"deferred device error: {error_message(code)}",
                              op=error_message(code).rsplit(" in ", 1)[-1], kind="device_data")


def _read_host(address: int, n: int) -> bytes:
    import ctypes

    return ctypes.string_at(address, n)


def _abandoned(exc_type: object, scope: Scope) -> bool:
    """Whether a scope's ``__exit__`` must only abandon it: the scope or its session is
    dead already, it is exited from another thread, or a generator that held it open was
    closed (``GeneratorExit``: collected, at an arbitrary time)."""
    return (exc_type is GeneratorExit or not scope.live
            or scope.thread != threading.get_ident())


class _SubScope(Authority):
    """The ``with`` block of a raw or kernel sub-session (DESIGN 3.1, 3.2). A scope that
    is never exited (collected, or left in a suspended generator) is only abandoned: its
    sub-session dies and no context is touched."""

    __slots__ = ("_session", "_op", "_kernels", "_guard", "_scope")

    def __init__(self, session: CudaExecSession, op: str, kernels: bool) -> None:
        self._session, self._op, self._kernels = session, op, kernels
        self._guard: ScopeGuard | None = None
        self._scope: Scope | None = None

    def __enter__(self) -> Any:
        from .kernel_session import KernelSession
        from .raw import RawSession

        session, op = self._session, self._op
        if self._scope is not None:
            raise ValidationError("a sub-session scope is entered once", op=op)
        ctx = entry.check(session, op, "raw")  # 1. the session stream of the calling thread
        with ctx.runtime.current():
            ctx.flush()  # 2. pending work is enqueued before the body runs
        scope = Scope("kernel session" if self._kernels else "raw session", session._scope)
        self._guard = ScopeGuard(ctx.context, op, scope.end)  # 3.-4. save, push primary
        self._scope = scope
        cls = KernelSession if self._kernels else RawSession
        return cls._make(session, ctx, scope, op)  # 5.

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        scope, guard = self._scope, self._guard
        if scope is None or guard is None or not guard.open:
            return
        if _abandoned(exc_type, scope):
            guard.abandon()
            return
        scope.end()
        try:
            if self._kernels:
                ctx = self._session._ctx
                with ctx.runtime.current():
                    ctx.flush()
        finally:
            guard.exit()  # 6. the stack exactly as it was; best effort, never raises

    def __del__(self) -> None:
        if self._guard is not None:
            self._guard.abandon()


if nvtx.enabled():
    nvtx.instrument(CudaExecSession)


def _end_session(scope: Scope, ctx: ExecContext) -> None:
    """The session is dead and the thread free to open another (no driver call)."""
    scope.end()
    ctx.session_open = False


class _SessionScope(Authority):
    """The ``with`` block of ``cuda_exec_session``. A scope that is never exited
    (collected, or left in a suspended generator) is only abandoned: the session dies,
    the thread may open another, and no context is touched."""

    __slots__ = ("_device", "_session", "_guard")

    def __init__(self, device: int) -> None:
        self._device = device
        self._session: CudaExecSession | None = None
        self._guard: ScopeGuard | None = None

    def __enter__(self) -> CudaExecSession:
        op = "cuda_exec_session"
        if self._session is not None:
            if self._session._scope.alive:
                raise SessionEntryError("this session scope is open already; use its "
                                        "session instead of entering it again", op=op,
                                        kind="reentered")
            raise ValidationError("a session scope is entered once", op=op)
        runtime = CudaRuntime.get(self._device)
        runtime.check_alive(op)
        ctx = runtime.exec_context()
        if ctx.session_open:
            raise SessionEntryError(
                f"a session for device {self._device} is already open on this thread; "
                "use that session instead of entering a second one", op=op, kind="reentered")
        session = CudaExecSession._open(runtime, ctx, _TOKEN)
        guard = ScopeGuard(runtime.context, op, functools.partial(_end_session,
                                                                  session._scope, ctx))
        try:
            if ctx.capture is not None:  # left open by a capture scope that never exited
                ctx.capture.abandon("a new session")
        except BaseException:
            guard.exit()
            raise
        self._guard = guard
        ctx.session_open = True
        self._session = session
        return session

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        session, guard = self._session, self._guard
        if session is None or guard is None or not guard.open:
            return
        if _abandoned(exc_type, session._scope):
            guard.abandon()
            return
        _end_session(session._scope, session._ctx)
        ctx = session._ctx
        try:
            if not ctx.closed:
                with ctx.runtime.current():
                    if ctx.capture is not None:  # a capture scope that never exited
                        ctx.capture.abandon("the session's exit")
                    ctx.flush()
        finally:
            guard.exit()

    def __del__(self) -> None:
        if self._guard is not None:
            self._guard.abandon()


def cuda_exec_session(device: int = 0) -> _SessionScope:
    """Open the execution session of ``device`` for the calling thread:
    ``with cuda_exec_session(0) as s: ...``."""
    if type(device) is not int or device < 0:
        raise ValidationError(f"device must be an int >= 0 (got {device!r})",
                              op="cuda_exec_session")
    return _SessionScope(device)


def with_cuda_exec_session(fn: Callable[[CudaExecSession], R], device: int = 0) -> R:
    """Call ``fn(session)`` inside ``cuda_exec_session(device)`` and return its result."""
    with cuda_exec_session(device) as session:
        return fn(session)
