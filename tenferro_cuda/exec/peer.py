"""Copies between two execution contexts (two sessions, usually of two devices).

The route of a copy from context ``src`` into context ``dst`` is decided once per pair of
runtimes and kept for the process (``route``):

- ``"device"``: both runtimes are on one device; one device-to-device copy.
- ``"peer"``: ``cuDeviceCanAccessPeer`` says ``dst``'s device can reach ``src``'s memory.
  ``src``'s pool is then opened to ``dst``'s device once (``cuMemPoolSetAccess``: pool
  memory ignores ``cuCtxEnablePeerAccess``), and a copy is one device-to-device copy that
  ``dst``'s copy engine runs over NVLink or PCIe.
- ``"host"``: otherwise, or when opening the pool fails: staged through page-locked,
  portable host memory.

A ``Link`` is what the copies from one context into another reuse: two events for the
direct routes and, for the host route, ``SLOTS`` host slots of ``SLOT_BYTES`` with an
event pair each. Every step is stream-ordered on both sides and nothing blocks the host:

- direct: ``src`` records *ready*; ``dst`` waits for it, copies, records *done*; ``src``
  waits for *done*, so its later work (a free of the source, say) follows the copy.
- host, per chunk in slot k: ``src`` waits until ``dst`` has drained slot k (its last
  use), copies the chunk into it and records *filled[k]*; ``dst`` waits for that, copies
  the slot out and records *drained[k]*. The source is read on ``src``'s own stream, so
  its later work is ordered without another event.

Each driver call is made with the context of the stream it enqueues on current
(``guard.within``); the caller's context is current again afterwards. A ``Link`` belongs
to the ``src`` context, which closes it (``ExecContext.close``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from .. import _driver, _driver_memory
from ..authority import Authority
from ..errors import BackendSourceError, ContextLostError, UnsupportedError, ValidationError
from . import guard

__all__ = ["ROUTES", "SLOT_BYTES", "SLOTS", "Link", "route", "choose", "peer_capable"]

ROUTES = ("auto", "peer", "host")
SLOT_BYTES = 8 << 20  # one staging slot: large enough to keep PCIe busy, two in flight
SLOTS = 2
_log = logging.getLogger("tenferro_cuda")
_routes: dict[tuple[int, int], str] = {}
_lock = threading.Lock()


def peer_capable(src_rt: Any, dst_rt: Any) -> bool:
    """Whether ``dst_rt``'s device may read ``src_rt``'s device memory (the driver's
    answer; False for one device, which is not its own peer)."""
    if src_rt.ordinal == dst_rt.ordinal:
        return False
    return _driver.can_access_peer(dst_rt.device, src_rt.device)


def _decide(src_rt: Any, dst_rt: Any) -> str:
    if src_rt.ordinal == dst_rt.ordinal:
        return "device"
    if not peer_capable(src_rt, dst_rt):
        return "host"
    try:
        _driver_memory.mem_pool_grant_access(src_rt.pool.handle, dst_rt.ordinal)
    except ContextLostError:
        raise
    except BackendSourceError as exc:
        _log.warning("device %d cannot open device %d's memory pool (%s); copies between "
                     "them are staged through host memory", dst_rt.ordinal, src_rt.ordinal,
                     exc)
        return "host"
    return "peer"


def route(src_rt: Any, dst_rt: Any) -> str:
    """The route of copies from ``src_rt`` into ``dst_rt`` (decided on first use)."""
    key = (src_rt.identity.serial, dst_rt.identity.serial)
    found = _routes.get(key)
    if found is None:
        with _lock:
            found = _routes.get(key)
            if found is None:
                found = _routes[key] = _decide(src_rt, dst_rt)
    return found


def choose(src: Any, dst: Any, wanted: str, op: str) -> str:
    """The route for a copy asked for with ``wanted`` (one of ``ROUTES``); ``"same"`` when
    ``src`` is ``dst`` and no staging is asked for. Raises before anything is done:
    ValidationError for an unknown ``wanted``, UnsupportedError for ``"peer"`` between
    devices without peer access."""
    if not isinstance(wanted, str) or wanted not in ROUTES:
        raise ValidationError(f"route must be one of {ROUTES} (got {wanted!r})", op=op)
    if wanted == "host":
        return "host"
    if src is dst:
        return "same"
    how = route(src.runtime, dst.runtime)
    if wanted == "peer" and how == "host":
        raise UnsupportedError(
            f"no peer access from device {dst.ordinal} to device {src.ordinal} "
            "(cuDeviceCanAccessPeer); use route='auto' or 'host' to stage through host "
            "memory", op=op)
    return how


def _event(ctx: Any) -> Any:
    with guard.within(ctx.context, ctx.context_id):
        return _driver.event_create()


class Link(Authority):
    """The reusable state of copies from ``src`` into ``dst`` (see the module docstring)."""

    __slots__ = ("src", "dst", "ready", "done", "host", "filled", "drained", "used", "slot")

    def __init__(self, src: Any, dst: Any) -> None:
        self.src, self.dst = src, dst
        self.ready: Any = None
        self.done: Any = None
        self.host = 0
        self.filled: list = []
        self.drained: list = []
        self.used = [False] * SLOTS
        self.slot = 0

    def copy(self, how: str, dst_ptr: int, src_ptr: int, nbytes: int, op: str) -> None:
        """Enqueue the copy of ``nbytes`` from ``src_ptr`` (``src``'s memory) to
        ``dst_ptr`` (``dst``'s) on the route ``how`` (``device``, ``peer`` or ``host``)."""
        if nbytes <= 0:
            return
        if how == "host":
            self._staged(dst_ptr, src_ptr, nbytes, op)
        else:
            self._direct(dst_ptr, src_ptr, nbytes, op)

    def _direct(self, dst_ptr: int, src_ptr: int, nbytes: int, op: str) -> None:
        src, dst = self.src, self.dst
        if self.ready is None:
            self.ready = _event(src)
        if self.done is None:
            self.done = _event(dst)
        with guard.within(src.context, src.context_id):
            _driver.event_record(self.ready, src.stream)
        with guard.within(dst.context, dst.context_id):
            _driver.stream_wait_event(dst.stream, self.ready)
            _driver_memory.memcpy_dtod_async(dst_ptr, src_ptr, nbytes, dst.stream, op)
            _driver.event_record(self.done, dst.stream)
        with guard.within(src.context, src.context_id):
            _driver.stream_wait_event(src.stream, self.done)

    def _slots(self) -> int:
        if not self.host:
            src, dst = self.src, self.dst
            with guard.within(src.context, src.context_id):  # first: it may fail
                host = _driver_memory.host_alloc_pinned(SLOT_BYTES * SLOTS, portable=True)
            self.host = host
            if not self.filled:  # (made once: a failed allocation above made none)
                self.filled = [_event(src) for _ in range(SLOTS)]
                self.drained = [_event(dst) for _ in range(SLOTS)]
        return self.host

    def _staged(self, dst_ptr: int, src_ptr: int, nbytes: int, op: str) -> None:
        src, dst = self.src, self.dst
        host = self._slots()
        for offset in range(0, nbytes, SLOT_BYTES):
            n = min(SLOT_BYTES, nbytes - offset)
            k = self.slot
            self.slot = (k + 1) % SLOTS
            slot = host + k * SLOT_BYTES
            with guard.within(src.context, src.context_id):
                if self.used[k]:
                    _driver.stream_wait_event(src.stream, self.drained[k])
                _driver_memory.memcpy_dtoh_async(slot, src_ptr + offset, n, src.stream, op)
                _driver.event_record(self.filled[k], src.stream)
            with guard.within(dst.context, dst.context_id):
                _driver.stream_wait_event(dst.stream, self.filled[k])
                _driver_memory.memcpy_htod_async(dst_ptr + offset, slot, n, dst.stream, op)
                _driver.event_record(self.drained[k], dst.stream)
            self.used[k] = True

    def close(self) -> None:
        """Wait until no copy reads the host slots, then free them and the events; never
        raises (a lost context frees everything anyway)."""
        host, self.host = self.host, 0
        for k, event in enumerate(self.drained):
            if host and self.used[k]:
                try:
                    _driver.event_synchronize(event)
                except Exception:  # noqa: BLE001 - closing is best effort by contract
                    pass
        if host:
            _driver_memory.host_free(host)  # returns the status; never raises
        events = [self.ready, self.done, *self.filled, *self.drained]
        self.ready = self.done = None
        self.filled, self.drained = [], []
        for event in events:
            if event is not None:
                try:
                    _driver.event_destroy(event)
                except Exception:  # noqa: BLE001
                    pass
