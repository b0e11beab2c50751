"""Device memory: buffers on the runtime's stream-ordered pool.

Guarantees:
- ``MemoryPool.alloc`` takes memory with ``cuMemAllocFromPoolAsync`` from a pool whose
  release threshold keeps freed memory cached, so steady-state allocation never calls
  ``cuMemAlloc``; the GPU is never preallocated.
- A ``DeviceBuffer`` records its device, allocation domain, a process-unique allocation
  id and the stream it belongs to. It is freed stream-ordered on that stream when its last
  reference goes or at once by ``release()`` (``reclaim_buffer``). The release path never
  raises and does nothing while the interpreter is finalizing. (``__del__`` on this
  handle-only object instead of ``weakref.finalize``: it costs 0.2 us per buffer instead
  of 1.2 us, and the per-op host cost is a project target.)
- Each stream (one per thread) has an ``_Arena``: its counters and free lists of buffers
  up to ``RECYCLE_LIMIT`` bytes (sizes rounded to 512 B, at most ``RECYCLE_CACHE_BYTES``
  idle per stream), which are handed out again on that same stream without a driver
  call: a repeated op allocates its output for the cost of a list pop. The idle memory is
  no extra reservation (the driver pool keeps freed memory reserved anyway); the arena
  drains back to the driver pool when an allocation runs out of memory and on ``trim``.
  Reuse on the stream that freed a buffer is ordered after every earlier use (the rule
  the driver's own stream-ordered pool follows). An arena is touched only by its own
  thread, so the hot path takes no lock; a buffer whose last reference dies on another
  thread is queued (an atomic deque append) and taken back by the owner.
- An optional limit bounds the bytes live in the pool; exceeding it, or the device
  running out, raises ``OutOfMemoryError`` with the pool statistics and leaves the
  session usable.
"""

from __future__ import annotations

import collections
import itertools
import sys
import threading

from . import _driver
from .errors import OutOfMemoryError

_alloc_ids = itertools.count(1)
_next_id = _alloc_ids.__next__
_new = object.__new__
_get_ident = threading.get_ident
_finalizing = sys.is_finalizing
_INVALID_CONTEXT = 201
RECYCLE_LIMIT = 64 << 20  # buffers up to 64 MiB are recycled per stream
RECYCLE_CACHE_BYTES = 512 << 20  # at most this much idles in one stream's free lists
_GRANULE = 512


class DeviceBuffer:
    """One stream-ordered allocation (or a zero-byte placeholder with ``ptr == 0``).

    ``pool`` is None for memory we do not own (adopted foreign arrays): release then only
    drops ``owner``, the object that keeps the producer alive."""

    __slots__ = ("ptr", "nbytes", "domain", "alloc_id", "ordinal", "stream", "pool",
                 "arena", "freed", "owner", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, pool: MemoryPool | None, stream, domain: int,
                 ordinal: int, owner: object = None, arena: _Arena | None = None) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.pool = pool
        self.arena = arena
        self.stream = stream
        self.domain = domain
        self.ordinal = ordinal
        self.alloc_id = next(_alloc_ids)
        self.freed = False
        self.owner = owner

    def release(self) -> None:
        """Free now (stream-ordered); idempotent, never raises."""
        if self.freed:
            return
        self.freed = True
        arena = self.arena
        if arena is not None and self.ptr and not _finalizing():
            arena.give_back(self.ptr, self.nbytes)
        self.owner = None

    def __del__(self) -> None:
        # The hot case inline (a recycled small buffer dying on its own thread): this runs
        # once per op output, so it avoids the calls of release/give_back/keep.
        if self.freed:
            return
        try:
            arena = self.arena
            nbytes = self.nbytes
            if arena is not None and nbytes <= RECYCLE_LIMIT and arena.thread == _get_ident() \
                    and not arena.pool.closed and not _finalizing():
                lst = arena.lists.get(nbytes)
                if lst is not None and arena.cached_bytes + nbytes <= RECYCLE_CACHE_BYTES \
                        and self.ptr:
                    self.freed = True
                    lst.append(self.ptr)
                    arena.cached_bytes += nbytes
                    arena.frees += 1
                    return
            self.release()
        except Exception:  # noqa: BLE001 - a finalizer must never raise
            pass

    def __repr__(self) -> str:
        state = "freed" if self.freed else "live"
        return f"DeviceBuffer(0x{self.ptr:x}, {self.nbytes} B, id={self.alloc_id}, {state})"


class _Arena:
    """The per-stream part of the pool; mutated only by the thread that owns the stream.

    Counters: ``held_bytes`` is what this arena holds from the driver (live + recycled),
    ``cached_bytes`` the recycled part, so a recycled hand-out or take-back touches only
    ``cached_bytes`` and one event counter."""

    __slots__ = ("pool", "stream", "thread", "lists", "remote", "held_bytes", "cached_bytes",
                 "allocations", "frees")

    def __init__(self, pool: MemoryPool, stream) -> None:
        self.pool, self.stream, self.thread = pool, stream, threading.get_ident()
        self.lists: dict[int, list[int]] = {}
        self.remote: collections.deque = collections.deque()  # (ptr, nbytes) from others
        self.held_bytes = self.cached_bytes = 0
        self.allocations = self.frees = 0

    @property
    def live_bytes(self) -> int:
        return self.held_bytes - self.cached_bytes

    @property
    def live_buffers(self) -> int:
        return self.allocations - self.frees

    def give_back(self, ptr: int, nbytes: int) -> None:
        if self.pool.closed:
            return
        if threading.get_ident() != self.thread:
            if nbytes > RECYCLE_LIMIT:
                self.pool.driver_free(ptr, self.stream)  # thread-safe; counters later
                ptr = 0
            self.remote.append((ptr, nbytes))
            return
        self.keep(ptr, nbytes)

    def keep(self, ptr: int, nbytes: int) -> None:
        """Owner thread: recycle a small buffer or free it on the driver pool."""
        self.frees += 1
        if not ptr:
            self.held_bytes -= nbytes  # freed on the driver by the releasing thread
            return
        if nbytes <= RECYCLE_LIMIT and self.cached_bytes + nbytes <= RECYCLE_CACHE_BYTES:
            lst = self.lists.get(nbytes)
            if lst is None:
                lst = self.lists[nbytes] = []
            lst.append(ptr)
            self.cached_bytes += nbytes
        else:
            self.held_bytes -= nbytes
            self.pool.driver_free(ptr, self.stream)

    def absorb(self) -> None:
        remote = self.remote
        while remote:
            self.keep(*remote.popleft())

    def drain(self) -> None:
        """Owner thread (or a dead owner): return recycled buffers to the driver pool."""
        self.absorb()
        lists, self.lists = self.lists, {}
        for ptrs in lists.values():
            for ptr in ptrs:
                self.pool.driver_free(ptr, self.stream)
        self.held_bytes -= self.cached_bytes
        self.cached_bytes = 0


class MemoryPool:
    """The runtime's stream-ordered pool with statistics and an optional byte limit."""

    def __init__(self, ordinal: int, context, domain: int, limit: int | None = None) -> None:
        self.ordinal = ordinal
        self.context = context
        self.domain = domain
        self.limit = limit
        self.handle = _driver.mem_pool_create(ordinal)
        self._lock = threading.Lock()
        self._arenas: dict[int, _Arena] = {}
        self.closed = False

    def _arena(self, stream) -> _Arena:
        arena = self._arenas.get(id(stream))
        if arena is None:
            with self._lock:
                arena = self._arenas.setdefault(id(stream), _Arena(self, stream))
        return arena

    def alloc(self, nbytes: int, stream, op: str = "") -> DeviceBuffer:
        """A buffer of at least ``nbytes`` for use on ``stream`` (the caller's stream)."""
        arena = self._arenas.get(id(stream))
        if arena is not None and 0 < nbytes <= RECYCLE_LIMIT and not arena.remote \
                and self.limit is None:
            nbytes = (nbytes + _GRANULE - 1) & -_GRANULE
            lst = arena.lists.get(nbytes)
            if lst:  # the hot case: a recycled buffer, no driver call, no __init__
                arena.cached_bytes -= nbytes
                arena.allocations += 1
                buf = _new(DeviceBuffer)
                buf.ptr, buf.nbytes, buf.pool, buf.arena, buf.stream = \
                    lst.pop(), nbytes, self, arena, stream
                buf.domain, buf.ordinal, buf.alloc_id, buf.freed, buf.owner = \
                    self.domain, self.ordinal, _next_id(), False, None
                return buf
        return self._alloc(nbytes, stream, op)

    def _alloc(self, nbytes: int, stream, op: str) -> DeviceBuffer:
        if nbytes <= 0:
            return DeviceBuffer(0, 0, None, stream, self.domain, self.ordinal)
        arena = self._arenas.get(id(stream)) or self._arena(stream)
        if arena.remote:
            arena.absorb()
        if nbytes <= RECYCLE_LIMIT:
            nbytes = (nbytes + _GRANULE - 1) & -_GRANULE
        if self.limit is not None and self.live_bytes + nbytes > self.limit:
            raise OutOfMemoryError(
                f"allocating {nbytes} bytes would exceed the pool limit of {self.limit} "
                f"bytes ({self.live_bytes} live)", op=op, requested_bytes=nbytes)
        lst = arena.lists.get(nbytes) if nbytes <= RECYCLE_LIMIT else None
        if lst:
            arena.cached_bytes -= nbytes
            arena.allocations += 1
            return DeviceBuffer(lst.pop(), nbytes, self, stream, self.domain, self.ordinal,
                                None, arena)
        ptr = self._driver_alloc(nbytes, stream, arena, op)
        arena.held_bytes += nbytes
        arena.allocations += 1
        return DeviceBuffer(ptr, nbytes, self, stream, self.domain, self.ordinal, None, arena)

    def _driver_alloc(self, nbytes: int, stream, arena: _Arena, op: str) -> int:
        try:
            try:
                return _driver.mem_alloc_async(nbytes, self.handle, stream, op)
            except OutOfMemoryError:
                if not arena.cached_bytes:
                    raise
                arena.drain()  # give the recycled buffers back and try once more
                return _driver.mem_alloc_async(nbytes, self.handle, stream, op)
        except OutOfMemoryError as exc:
            raise OutOfMemoryError(f"{exc.args[0]}; pool: {self.stats()}", op=op,
                                   requested_bytes=nbytes) from exc.__cause__

    def driver_free(self, ptr: int, stream) -> None:
        """Stream-ordered free on the driver pool; never raises."""
        status = _driver.mem_free_async(ptr, stream)
        if status == _INVALID_CONTEXT:  # no current context on this thread: enter ours
            try:
                _driver.ctx_push(self.context)
                try:
                    _driver.mem_free_async(ptr, stream)
                finally:
                    _driver.ctx_pop()
            except Exception:  # noqa: BLE001 - a lost context frees everything anyway
                pass

    def _sum(self, field: str) -> int:
        total = sum(getattr(a, field) for a in list(self._arenas.values()))
        if field in ("live_bytes", "live_buffers"):  # queued cross-thread releases
            for a in list(self._arenas.values()):
                pending = list(a.remote)
                total -= sum(n for _, n in pending) if field == "live_bytes" else len(pending)
        return total

    @property
    def live_bytes(self) -> int:
        return self._sum("live_bytes")

    def stats(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {
            "live_bytes": self.live_bytes,
            "live_buffers": self._sum("live_buffers"),
            "allocations": self._sum("allocations"),
            "frees": self._sum("frees"),
            "recycled_bytes": self._sum("cached_bytes"),
            "limit": self.limit,
        }
        if not self.closed:
            out.update(_driver.mem_pool_stats(self.handle))
        return out

    def trim(self, keep: int = 0) -> None:
        """Return cached memory (beyond ``keep`` bytes) to the driver. The caller has
        synchronized the streams, so stream-ordered frees have completed. Recycled buffers
        of this thread's arena and of arenas whose thread has exited go back first."""
        alive = {t.ident for t in threading.enumerate()}
        me = threading.get_ident()
        for arena in list(self._arenas.values()):
            if arena.thread == me or arena.thread not in alive:
                arena.drain()
        _driver.mem_pool_trim(self.handle, keep)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _driver.mem_pool_destroy(self.handle)
