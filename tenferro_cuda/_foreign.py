"""Memory shared with other libraries: stream ordering, deferred release, owner lookup.

Guarantees (used by ``dlpack.py``, ``cai.py`` and ``ops/interop.py``):
- ``order_after(waiter, producer, context, op)`` makes ``waiter`` wait for the work enqueued
  so far on ``producer`` (a stream or a raw handle) with one event (record on
  ``producer``, wait on ``waiter``); it never synchronizes the host or the device.
  ``context`` is made current around the calls when another one is current, and put back
  afterwards (through the context guard, ``exec/guard.py``).
- ``consumer_stream(value, op)`` maps a DLPack/array-API ``stream=`` argument to a stream
  handle: ``None`` and ``1`` are the legacy default stream, ``2`` the per-thread default
  stream, ``-1`` means "no synchronization" (``None`` is returned), larger values are
  raw ``CUstream`` handles. ``0`` (ambiguous, disallowed by the rules, but sent by some
  older consumers) is taken as the driver's NULL stream, i.e. the legacy default stream.
- ``release_when_idle(stream, fn, home)`` runs ``fn`` (a foreign deleter, or dropping the
  last reference to a foreign array) only once ``stream`` has finished the work enqueued so
  far, so that the producer's allocator cannot hand the memory out again while our kernels
  still read it. It never blocks: ``fn`` runs at once when the stream is idle, otherwise at
  the next interop call that finds it idle, and at the latest at interpreter exit. It never
  raises.
- A *home* is the object that owns a stream: a ``CudaRuntime`` or its ``MemoryPool``, both
  with ``.context`` and ``.closed``. A closed home's streams are destroyed (and were
  synchronized first), so they are never touched again: idle by definition.
- ``export_home(buffer, op)`` returns the home of a device buffer, after checking that it
  is usable and enqueueing its pending work for the calling thread's stream.
"""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Callable
from typing import Any

from . import _driver
from .errors import RuntimeStateError
from .exec import guard

__all__ = ["order_after", "consumer_stream", "release_when_idle", "drain", "export_home"]

_LEGACY_STREAM = 1

_parked: list[tuple[Any, Callable[[], None], Any]] = []  # (stream, fn, home)
_parked_lock = threading.Lock()
_atexit_registered = False


def consumer_stream(value: object, op: str):
    """The stream handle a consumer asked us to order after, or None for ``-1``."""
    if value is None:
        value = _LEGACY_STREAM
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{op}: stream must be an int or None (got {type(value).__name__})")
    if value == -1:
        return None
    if value == 0:
        value = _LEGACY_STREAM  # disallowed by the rules as ambiguous; the driver's NULL stream
    if value < -1:
        raise BufferError(f"{op}: stream must be -1, None or a CUDA stream handle "
                          f"(got {value})")
    return _driver.stream_handle(value)


def order_after(waiter, producer, context, op: str) -> None:
    """Make ``waiter`` wait (on the device) for the work enqueued so far on ``producer``."""
    if isinstance(producer, int):
        producer = _driver.stream_handle(producer)
    if context is None:
        _record_and_wait(waiter, producer)
        return
    with guard.within(context, int(context)):
        _record_and_wait(waiter, producer)


def _record_and_wait(waiter, producer) -> None:
    event = _driver.event_create()
    try:
        _driver.event_record(event, producer)
        _driver.stream_wait_event(waiter, event)
    finally:
        _driver.event_destroy(event)


def _idle(stream, home) -> bool:
    """True when ``stream`` has no pending work (or cannot be asked any more)."""
    if home is not None and home.closed:
        return True
    try:
        return _driver.stream_query(stream)
    except Exception:  # noqa: BLE001 - e.g. no current context on this thread
        pass
    if home is None:
        return True
    try:
        with guard.within(home.context, int(home.context)):
            return _driver.stream_query(stream)
    except Exception:  # noqa: BLE001 - a lost context: nothing to wait for
        return True


def _run(fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - a release path never raises
        print(f"tenferro_cuda: releasing foreign memory failed: {exc!r}", file=sys.stderr)


def release_when_idle(stream, fn: Callable[[], None], home=None) -> None:
    """Run ``fn`` once ``stream`` is idle (at once if it is); never blocks, never raises."""
    global _atexit_registered
    try:
        if sys.is_finalizing():
            return  # foreign deleters must not run while the interpreter tears down
        drain()
        if stream is None or _idle(stream, home):
            _run(fn)
            return
        with _parked_lock:
            _parked.append((stream, fn, home))
            if not _atexit_registered:
                atexit.register(_release_all_at_exit)
                _atexit_registered = True
    except Exception as exc:  # noqa: BLE001 - called from finalizers
        print(f"tenferro_cuda: deferring a foreign release failed: {exc!r}", file=sys.stderr)


def drain() -> None:
    """Run the parked releases whose stream has become idle (non-blocking)."""
    if not _parked:
        return
    with _parked_lock:
        entries = list(_parked)
    ready = [e for e in entries if _idle(e[0], e[2])]
    if not ready:
        return
    with _parked_lock:
        for entry in ready:
            _parked.remove(entry)
    for entry in ready:
        _run(entry[1])


def parked_count() -> int:
    """How many foreign releases wait for their stream (for tests and diagnostics)."""
    return len(_parked)


def _release_all_at_exit() -> None:
    with _parked_lock:
        entries = list(_parked)
        _parked.clear()
    for stream, fn, home in entries:
        try:
            if home is not None and not home.closed:
                with guard.within(home.context, int(home.context)):
                    _driver.stream_synchronize(stream)
        except Exception:  # noqa: BLE001 - at exit, release anyway
            pass
        _run(fn)


def _owner_runtime(buffer):
    from .runtime import CudaRuntime

    for rt in list(CudaRuntime._registry.values()):
        if rt.domain.value == buffer.domain:
            return rt
    return None


def export_home(buffer, op: str):
    """The home (runtime or pool) of ``buffer``, after checking it is usable and flushing
    its pending work of the calling thread (when ``buffer`` is on this thread's stream)."""
    rt = _owner_runtime(buffer)
    if rt is None:
        home = buffer.pool if buffer.pool is not None else getattr(buffer.owner, "home", None)
        if home is not None and home.closed:
            raise RuntimeStateError(f"the runtime of device {buffer.ordinal} that owns this "
                                    f"tensor is closed", op=op)
        return home
    rt.check_alive(op)
    for ctx in list(rt._contexts):
        if ctx.stream is buffer.stream and ctx.thread == threading.get_ident():
            ctx.flush()
    return rt
