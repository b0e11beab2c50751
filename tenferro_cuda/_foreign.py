"""Memory shared with other libraries: stream values, stream ordering, deferred release.

Guarantees (used by ``dlpack.py``, ``_dlpack_export.py``, ``cai.py`` and ``ops/interop``):
- ``stream_value(value, op, error)`` turns a stream argument into a raw handle (an int):
  ints as they are, and any object with ``__cuda_stream__`` (cuda.core's protocol: it
  returns ``(0, handle)``; handle 0, the NULL stream, reads as the legacy default stream
  1). Anything else raises ``error`` (TypeError for the protocol methods, ValidationError
  for session methods).
- ``consumer_stream(value, op)`` maps ``__dlpack__``'s ``stream=`` (DLPack 1.x / array
  API): ``None`` and ``1`` are the legacy default stream, ``2`` the per-thread default
  stream, ``-1`` means no synchronization (``None`` is returned), larger values and
  protocol objects are that stream. ``0`` (ambiguous: disallowed by the rules) and other
  negative values raise BufferError.
- ``order(ctx, waiter, producer)`` makes ``waiter`` wait, on the device, for the work
  enqueued so far on ``producer``: one ``cuEventRecord`` and one ``cuStreamWaitEvent``
  with an event of the context's pool (``ctx.events``), taken for the two calls and put
  back, so steady state creates no event (a nested or concurrent use takes another one;
  at most ``POOL_LIMIT`` idle events are kept). It never synchronizes the host. The
  context is made current around the calls when another one is (op bodies, where ours
  is current already, pass ``current=True``).
- ``release_when_idle(stream, fn, arg, home)`` calls ``fn(arg)`` (a foreign deleter, or
  dropping the last reference to a foreign array) only once ``stream`` has finished the
  work enqueued so far, so that the producer's allocator cannot hand the memory out while
  our kernels still read it. It never blocks: at once when the stream is idle (one
  ``cuStreamQuery``), otherwise at the next interop call or session ``synchronize()``
  that finds it idle (one query per stream for all that wait on it) or when a runtime
  closes (a closed home's streams are idle), at the latest at interpreter exit. Never
  raises.
  While another library captures a graph in global mode (PyTorch's default), CUDA
  refuses stream queries from every thread and invalidates that capture; the release
  then counts the stream as busy and waits for a later drain, never releasing early.
  (The export and the ordering of imports use no query: an event record and a wait are
  allowed during such a capture.)
- A *home* owns a stream: a ``CudaRuntime`` or its ``MemoryPool``, both with ``.context``
  and ``.closed``. A closed home's streams are destroyed (synchronized first), so they
  are never touched again: idle by definition.
- ``export_context(buffer, op)`` is the execution context of a device buffer (None for a
  buffer of no runtime), after checking that it may be exported (its runtime alive, its
  stream not capturing a graph: RuntimeStateError, and the capture is abandoned when the
  caller is the capturing thread) and enqueueing the calling thread's pending work on
  its stream.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from . import _driver, _driver_fast, _driver_memory
from .errors import RuntimeStateError, TenferroError
from .exec import guard
from .shapes import ADDRESS_LIMIT

__all__ = ["stream_value", "stream_of", "consumer_stream", "order",
           "release_when_idle", "drain", "export_context", "owner_context", "copy_on",
           "LEGACY_STREAM", "PER_THREAD_STREAM", "events_created"]

POOL_LIMIT = 8  # idle events kept per context
LEGACY_STREAM = _driver.stream_handle(1)
PER_THREAD_STREAM = _driver.stream_handle(2)
_DEFAULT_STREAMS = (None, LEGACY_STREAM, PER_THREAD_STREAM)

# (stream, fn, arg, home) of the releases that wait for their stream. No lock: these run
# from finalizers, which the garbage collector may start inside any allocation -- also
# inside a drain on the same thread -- so a lock here could deadlock its own thread. Each
# entry is taken with one atomic popleft, by exactly one drain, and run at most once.
Release = tuple[Any, Callable[[Any], object] | None, Any, Any]  # (stream, fn, arg, home)
_parked: deque[Release] = deque()
_atexit_registered = False
_created = [0]  # events made by the pools (tests: steady state makes none)
_finalizing = sys.is_finalizing
_ident = threading.get_ident


def _error(error: type[Exception], message: str, op: str) -> Exception:
    if issubclass(error, TenferroError):
        return error(message, op=op)
    return error(f"{op}: {message}")


def stream_value(value: object, op: str, error: type[Exception] = TypeError) -> int:
    """The raw handle of a stream argument: an int, or an object with ``__cuda_stream__``
    (a handle is below 2**64; the meaning of small and negative values is the caller's)."""
    if type(value) is int and value < ADDRESS_LIMIT:
        return value  # type: ignore[return-value]
    protocol = getattr(value, "__cuda_stream__", None)
    if protocol is None:
        if isinstance(value, int) and not isinstance(value, bool):
            if int(value) >= ADDRESS_LIMIT:
                raise _error(error, f"stream={int(value)} is no stream handle (a handle is "
                                    f"below 2**64)", op)
            return int(value)
        raise _error(error, f"stream must be an int or an object with __cuda_stream__ (got "
                            f"{type(value).__name__})", op)
    try:
        version, handle = protocol()
    except (TypeError, ValueError) as exc:
        raise _error(error, f"__cuda_stream__() must return (version, handle): {exc}",
                     op) from None
    if type(version) is not int or version != 0 or not isinstance(handle, int) \
            or isinstance(handle, bool) or not 0 <= handle < ADDRESS_LIMIT:
        raise _error(error, f"__cuda_stream__() must return (0, handle), a handle in "
                            f"[0, 2**64) (got ({version!r}, {handle!r}))", op)
    return int(handle) or 1  # the NULL stream is the legacy default stream


def stream_of(handle: int):
    """The CUstream of a raw handle >= 1 (the default streams 1 and 2 are shared)."""
    return _DEFAULT_STREAMS[handle] if handle < 3 else _driver.stream_handle(handle)


def consumer_stream(value: object, op: str, own=None):
    """The stream a DLPack consumer will use (a CUstream), or None for ``-1``; ``own``
    (the producer's CUstream) when the handle is its."""
    if value is None:
        return LEGACY_STREAM
    handle = stream_value(value, op)
    if handle == -1:
        return None
    if handle > 0:
        if handle < 3:
            return _DEFAULT_STREAMS[handle]
        if own is not None and handle == int(own):
            return own
        return _driver.stream_handle(handle)
    raise BufferError(f"{op}: stream={handle} is not allowed: pass -1 (no synchronization), "
                      f"None or 1 (legacy default stream), 2 (per-thread default stream) or "
                      f"a stream handle" + (" (0 is ambiguous)" if handle == 0 else ""))


# --- ordering ----------------------------------------------------------------------------

def _new_event():
    event = _driver.event_create()
    _created[0] += 1
    return event


def events_created() -> int:
    """How many events the context pools have made so far in this process."""
    return _created[0]


def order(ctx: Any, waiter, producer, current: bool = False) -> None:
    """Make ``waiter`` wait for the work enqueued so far on ``producer`` (module doc), with
    the context of ``ctx`` current: asked first (``guard.call_current``, inlined: an
    export and its release each order once), unless the caller says it is (``current``:
    inside an op)."""
    if not current and guard.current_id() != ctx.context_id:
        guard.call_pushed(ctx.context, order, ctx, waiter, producer, True)
        return
    events = ctx.events
    try:
        event = events.pop()
    except IndexError:  # empty, or another thread took the last one
        event = _new_event()
    try:
        _driver_fast.order(event, producer, waiter)
    finally:
        if len(events) < POOL_LIMIT:
            events.append(event)
        else:
            _driver.event_destroy(event)


def copy_on(stream, dst: int, src: int, nbytes: int, op: str) -> None:
    """Enqueue a device-to-device copy of ``nbytes`` on ``stream`` (another library's)."""
    _driver_memory.memcpy_dtod_async(dst, src, nbytes, stream, op)


# --- deferred release ----------------------------------------------------------------------

# a query a graph capture refused (another library's capture in global mode, on any
# thread): the stream may well still be busy
_refused_by_capture = _driver.refused_by_capture


def _idle(stream, home) -> bool:
    """True when ``stream`` has no pending work (or cannot be asked any more); False
    while a graph capture forbids the question (asked again at the next drain)."""
    if home is not None and home.closed:
        return True
    try:
        return _driver_fast.stream_query(stream)
    except Exception as exc:  # noqa: BLE001 - e.g. no current context on this thread
        if _refused_by_capture(exc):
            return False
    if home is None:
        return True
    try:
        with guard.within(home.context, int(home.context)):
            return _driver_fast.stream_query(stream)
    except Exception as exc:  # noqa: BLE001 - a lost context: nothing to wait for
        return not _refused_by_capture(exc)


def _run(fn: Callable[[Any], object] | None, arg: Any) -> None:
    try:
        if fn is not None:
            fn(arg)
    except Exception as exc:  # noqa: BLE001 - a release path never raises
        print(f"tenferro_cuda: releasing foreign memory failed: {exc!r}", file=sys.stderr)


def release_when_idle(stream, fn: Callable[[Any], object] | None, arg: Any = None,
                      home=None) -> None:
    """Call ``fn(arg)`` once ``stream`` is idle (at once if it is); never blocks or raises.
    ``fn`` None: only ``arg`` is let go then (the last reference to a foreign array)."""
    global _atexit_registered
    try:
        if _finalizing():
            return  # foreign deleters must not run while the interpreter tears down
        if _parked:
            drain()
        if stream is not None and not _idle(stream, home):
            _parked.append((stream, fn, arg, home))
            if not _atexit_registered:
                # a closed runtime's streams are idle: what waits for one goes then
                from .runtime import install_close_hook

                install_close_hook(drain)  # (once per function)
                if not _atexit_registered:  # (the import may have let another thread in)
                    atexit.register(_release_all_at_exit)
                    _atexit_registered = True  # only once both are in place
            return
    except Exception as exc:  # noqa: BLE001 - called from finalizers
        print(f"tenferro_cuda: deferring a foreign release failed: {exc!r}", file=sys.stderr)
        return
    if fn is not None:
        _run(fn, arg)


def drain() -> None:
    """Run the parked releases whose stream has become idle (one query per stream). Safe
    to re-enter (a release it runs may drop the last reference to another foreign array)
    and to run on several threads: every entry is taken by one drain only."""
    idle: dict[tuple[int, int], bool] = {}
    waiting: list[Release] = []
    ready: list[Release] = []
    for _ in range(len(_parked)):
        try:
            entry = _parked.popleft()
        except IndexError:  # another drain took the rest
            break
        # (per home too: a closed home's destroyed stream may share its handle with a
        # live stream made since, whose work must still be waited for)
        key = (int(entry[0]), id(entry[3]))
        state = idle.get(key)
        if state is None:
            state = idle[key] = _idle(entry[0], entry[3])
        (ready if state else waiting).append(entry)
    _parked.extend(waiting)
    for entry in ready:
        _run(entry[1], entry[2])


def parked_count() -> int:
    """How many foreign releases wait for their stream (for tests and diagnostics)."""
    return len(_parked)


def _release_all_at_exit() -> None:
    entries = []
    while _parked:
        try:
            entries.append(_parked.popleft())
        except IndexError:
            break
    for stream, fn, arg, home in entries:
        try:
            if home is not None and not home.closed:
                with guard.within(home.context, int(home.context)):
                    _driver.stream_synchronize(stream)
        except Exception:  # noqa: BLE001 - at exit, release anyway
            pass
        _run(fn, arg)


# --- the execution context of an exported buffer -----------------------------------------

_by_arena: dict[int, tuple[Any, Any]] = {}  # id(arena) -> (arena, its ExecContext)


def owner_context(buffer) -> Any:
    """The ExecContext whose arena ``buffer`` came from (None: no live runtime has it)."""
    arena = buffer.origin
    hit = _by_arena.get(id(arena))
    if hit is not None and hit[0] is arena:
        return hit[1]
    from .runtime import CudaRuntime

    for rt in list(CudaRuntime._registry.values()):
        for ctx in list(rt._contexts):
            if ctx.home is arena:
                for key, (_, old) in list(_by_arena.items()):
                    if old.closed:
                        _by_arena.pop(key, None)
                _by_arena[id(arena)] = (arena, ctx)
                return ctx
    return None


def export_context(buffer, op: str) -> Any:
    """The ExecContext of ``buffer`` after checking its runtime is alive and enqueueing the
    calling thread's pending work on its stream; None for memory of no runtime (whose
    pool must not be closed)."""
    ctx = owner_context(buffer)
    if ctx is None:
        home = buffer.pool if buffer.pool is not None else getattr(buffer.owner, "home", None)
        if home is not None and home.closed:
            raise RuntimeStateError(f"the runtime of device {buffer.ordinal} that owns this "
                                    f"tensor is closed", op=op)
        return None
    ctx.runtime.check_alive(op)
    capture = getattr(ctx, "capture", None)
    if capture is not None:  # an ordering event would cross the capture's boundary
        if ctx.thread == _ident():
            capture.refuse(op)
        from .exec.capture import refused

        raise refused(op)
    if ctx.pending and ctx.thread == _ident():
        guard.call_current(ctx, ctx.flush)
    return ctx
