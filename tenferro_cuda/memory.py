"""Device memory: buffers on the runtime's stream-ordered pool.

Guarantees:
- ``MemoryPool.alloc`` takes memory with ``cuMemAllocFromPoolAsync`` from a pool whose
  release threshold keeps freed memory cached, so steady-state allocation never calls
  ``cuMemAlloc``; the GPU is never preallocated.
- A ``DeviceBuffer`` records its device, allocation domain, a process-unique allocation
  id and the stream it belongs to. It is freed stream-ordered on that stream when its last
  reference goes or at once by ``release()`` (``reclaim_buffer``). The release path never
  raises and makes no driver call while the interpreter is finalizing. (``__del__`` on this
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
import sys
import threading
from typing import Any

from . import _driver_memory
from .authority import Authority
from .errors import OutOfMemoryError

_new = object.__new__
_get_ident = threading.get_ident
_finalizing = sys.is_finalizing
_INVALID_CONTEXT = 201
RECYCLE_LIMIT = 64 << 20  # buffers up to 64 MiB are recycled per stream
RECYCLE_CACHE_BYTES = 512 << 20  # at most this much idles in one stream's free lists
_GRANULE = 512
# called (never raising) when an allocation finds no room, before it tries once more
_pressure_hooks: list = []


def install_pressure_hook(fn) -> None:
    """Call ``fn()`` whenever an allocation runs out of memory or over the pool's limit."""
    if fn not in _pressure_hooks:
        _pressure_hooks.append(fn)


def relieve() -> None:
    """Run the pressure hooks: each may give memory back (a finished export, say)."""
    for fn in list(_pressure_hooks):
        fn()


class DeviceBuffer(Authority):
    """One stream-ordered allocation (or a zero-byte placeholder with ``ptr == 0``).

    ``home`` is the ``_Arena`` of the execution context (one runtime, one thread) the
    buffer is resident in, and None once it is released: residency is the one test
    ``buffer.home is ctx.home`` (``exec/residency.py``). ``origin`` is that arena for
    good (messages, interop). ``owner`` is None for pool memory; for memory we do not own
    (adopted foreign arrays) it is the object that keeps the producer alive, and release
    only drops it. Copying or pickling a buffer raises TypeError (two owners of one
    allocation would free it twice)."""

    __slots__ = ("ptr", "nbytes", "home", "origin", "owner", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, arena: _Arena, owner: object = None) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.home: _Arena | None = arena
        self.origin = arena
        self.owner = owner

    @property
    def freed(self) -> bool:
        return self.home is None

    @property
    def domain(self) -> int:
        return self.origin.pool.domain

    @property
    def ordinal(self) -> int:
        return self.origin.pool.ordinal

    @property
    def stream(self):
        return self.origin.stream

    @property
    def pooled(self) -> bool:
        """Whether this is memory of the runtime's pool (graph memory included), as opposed
        to memory adopted from another library."""
        owner = self.owner
        return owner is None or getattr(owner, "pool_memory", False) is True

    @property
    def pool(self) -> MemoryPool | None:
        """The pool that owns this memory (None for adopted foreign memory)."""
        return self.origin.pool if self.owner is None else None

    def release(self) -> None:
        """Free now (stream-ordered); idempotent, never raises."""
        if self.home is None:
            return
        self.home = None
        if self.owner is None and self.ptr and not _finalizing():
            self.origin.give_back(self.ptr, self.nbytes)
        self.owner = None

    def __del__(self) -> None:
        # release() inline for adopted memory and for a small buffer recycled on its own
        # thread (once per op output): ``lists`` is emptied when the pool closes (set aside
        # in a capture), so taking its pointer makes no driver call, safe at exit too.
        if self.home is None:
            return
        try:
            if self.owner is not None:
                self.home = self.owner = None
                return
            arena = self.origin
            nbytes = self.nbytes
            if arena.thread == _get_ident():
                lst = arena.lists.get(nbytes)
                if lst is not None and arena.cached_bytes + nbytes <= RECYCLE_CACHE_BYTES \
                        and self.ptr:
                    self.home = None
                    lst.append(self.ptr)
                    arena.cached_bytes += nbytes
                    arena.frees += 1
                    return
            self.release()
        except Exception:  # noqa: BLE001 - a finalizer must never raise
            pass

    def __repr__(self) -> str:
        state = "freed" if self.home is None else "live"
        return f"DeviceBuffer(0x{self.ptr:x}, {self.nbytes} B, {state})"


class _Arena(Authority):
    """The per-stream part of the pool, i.e. of one execution context (a runtime and a
    thread); mutated only by the thread that owns the stream.

    Counters: ``held_bytes`` is what this arena holds from the driver (live + recycled),
    ``cached_bytes`` the recycled part, so a recycled hand-out or take-back touches only
    ``cached_bytes`` and one event counter."""

    __slots__ = ("pool", "stream", "thread", "lists", "remote", "held_bytes", "cached_bytes",
                 "allocations", "frees", "graph", "saved_lists", "lock")

    def __init__(self, pool: MemoryPool, stream) -> None:
        self.pool, self.stream, self.thread = pool, stream, threading.get_ident()
        self.lists: dict[int, list[int]] = {}
        self.remote: collections.deque = collections.deque()  # (ptr, nbytes) from others
        self.held_bytes = self.cached_bytes = 0
        self.allocations = self.frees = 0
        self.graph: Any = None  # the GraphMemory of a capture in progress
        self.saved_lists: dict[int, list[int]] = {}
        # another thread's release of a large buffer frees it on the driver at once, but
        # never while this arena's stream is being captured (the free would be recorded
        # into the graph): ``graph`` changes, and such a release decides, under this lock
        self.lock = threading.Lock()

    def begin_graph(self, memory: Any) -> None:
        """Route allocations to ``memory`` (a capture's GraphMemory) until ``end_graph``:
        the recycled lists are set aside, so the hot path finds nothing and ``_alloc``
        asks the graph; frees wait until the capture ends."""
        with self.lock:
            self.graph = memory
        self.saved_lists, self.lists = self.lists, {}

    def end_graph(self) -> None:
        with self.lock:
            memory, self.graph = self.graph, None
        if memory is None:
            return
        self.lists, self.saved_lists = self.saved_lists, {}
        deferred, memory.deferred = memory.deferred, []
        for ptr, nbytes in deferred:
            self.keep(ptr, nbytes)

    @property
    def live_bytes(self) -> int:
        return self.held_bytes - self.cached_bytes

    @property
    def live_buffers(self) -> int:
        return self.allocations - self.frees

    def alloc(self, nbytes: int, op: str = "") -> DeviceBuffer:
        """A buffer of at least ``nbytes`` on this arena's stream (the owner thread)."""
        size = (nbytes + _GRANULE - 1) & -_GRANULE
        lst = self.lists.get(size)  # keys: granule multiples in (0, RECYCLE_LIMIT] (keep)
        if lst and not self.remote and self.pool.limit is None:
            # the hot case: a recycled buffer, no driver call, no __init__
            self.cached_bytes -= size
            self.allocations += 1
            buf = _new(DeviceBuffer)
            buf.ptr = lst.pop()  # one store each: cheaper than unpacking a tuple
            buf.nbytes = size
            buf.home = buf.origin = self
            buf.owner = None
            return buf
        return self._alloc(nbytes, op)

    def _alloc(self, nbytes: int, op: str) -> DeviceBuffer:
        if nbytes <= 0:
            return DeviceBuffer(0, 0, self)
        pool = self.pool
        if pool.closed:
            raise OutOfMemoryError("the memory pool is closed", op=op, requested_bytes=nbytes)
        if self.remote:
            self.absorb()
        if nbytes <= RECYCLE_LIMIT:
            nbytes = (nbytes + _GRANULE - 1) & -_GRANULE
        if pool.limit is not None and pool.live_bytes + nbytes > pool.limit:
            relieve()  # (an export whose consumer let go gives its tensor back)
            if pool.live_bytes + nbytes > pool.limit:
                raise OutOfMemoryError(
                    f"allocating {nbytes} bytes would exceed the pool limit of {pool.limit} "
                    f"bytes; pool: {pool.stats()}", op=op, requested_bytes=nbytes)
        if self.graph is not None:
            return self.graph.alloc(nbytes, op)
        lst = self.lists.get(nbytes) if nbytes <= RECYCLE_LIMIT else None
        if lst:
            self.cached_bytes -= nbytes
            self.allocations += 1
            return DeviceBuffer(lst.pop(), nbytes, self)
        ptr = pool.driver_alloc(nbytes, self, op)
        self.held_bytes += nbytes
        self.allocations += 1
        return DeviceBuffer(ptr, nbytes, self)

    def adopt(self, ptr: int, nbytes: int, owner: object) -> DeviceBuffer:
        """A buffer over memory we do not own, resident here; ``owner`` keeps it alive."""
        return DeviceBuffer(ptr, nbytes, self, owner)

    def give_back(self, ptr: int, nbytes: int) -> None:
        if self.pool.closed:
            return
        if threading.get_ident() != self.thread:
            with self.lock:
                if nbytes > RECYCLE_LIMIT and self.graph is None:
                    self.pool.driver_free(ptr, self.stream)  # thread-safe; counters later
                    ptr = 0
                self.remote.append((ptr, nbytes))  # (a large one: freed by the owner)
            return
        self.keep(ptr, nbytes)

    def keep(self, ptr: int, nbytes: int) -> None:
        """Owner thread: recycle a small buffer or free it on the driver pool."""
        if self.graph is not None:  # during a capture: carried out when it ends
            self.graph.deferred.append((ptr, nbytes))
            return
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

    def forget(self) -> None:
        """The pool closed (its memory went with it): drop the recycled pointers, so that
        nothing hands them out or keeps new ones (``keep`` is not reached once closed)."""
        self.lists, self.saved_lists = {}, {}
        self.held_bytes -= self.cached_bytes
        self.cached_bytes = 0

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


class MemoryPool(Authority):
    """The runtime's stream-ordered pool with statistics and an optional byte limit.

    ``context`` is the primary context the pool's memory lives in; ``enter`` is the
    runtime's way of making it current around a driver call that needs it (a free from a
    thread with no current context)."""

    def __init__(self, ordinal: int, context, domain: int, enter=None,
                 limit: int | None = None) -> None:
        self.ordinal = ordinal
        self.context = context
        self.domain = domain
        self.limit = limit
        self._enter = enter
        self.handle = _driver_memory.mem_pool_create(ordinal)
        self._lock = threading.Lock()
        self._arenas: dict[int, _Arena] = {}
        self.closed = False

    def arena(self, stream) -> _Arena:
        """The arena of ``stream`` (created on first use)."""
        arena = self._arenas.get(id(stream))
        if arena is None:
            with self._lock:
                arena = self._arenas.setdefault(id(stream), _Arena(self, stream))
        return arena

    def alloc(self, nbytes: int, stream, op: str = "") -> DeviceBuffer:
        """A buffer of at least ``nbytes`` for use on ``stream`` (the caller's stream)."""
        return self.arena(stream).alloc(nbytes, op)

    def driver_alloc(self, nbytes: int, arena: _Arena, op: str) -> int:
        try:
            try:
                return _driver_memory.mem_alloc_async(nbytes, self.handle, arena.stream, op)
            except OutOfMemoryError:
                relieve()  # (an export whose consumer let go gives its tensor back)
                if arena.cached_bytes:
                    arena.drain()  # give the recycled buffers back
                return _driver_memory.mem_alloc_async(nbytes, self.handle, arena.stream, op)
        except OutOfMemoryError as exc:
            raise OutOfMemoryError(f"{exc.args[0]}; pool: {self.stats()}", op=op,
                                   requested_bytes=nbytes) from exc.__cause__

    def driver_free(self, ptr: int, stream) -> None:
        """Stream-ordered free on the driver pool; never raises."""
        status = _driver_memory.mem_free_async(ptr, stream)
        if status == _INVALID_CONTEXT and self._enter is not None:
            try:  # no current context on this thread: make ours current for the free
                with self._enter():
                    _driver_memory.mem_free_async(ptr, stream)
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
            out.update(_driver_memory.mem_pool_stats(self.handle))
        return out

    def drain(self) -> None:
        """Give the recycled buffers of this thread's arena, and of arenas whose thread
        has exited, back to the driver pool (stream-ordered frees)."""
        alive = {t.ident for t in threading.enumerate()}
        me = threading.get_ident()
        for arena in list(self._arenas.values()):
            if arena.thread == me or arena.thread not in alive:
                arena.drain()

    def trim(self, keep: int = 0) -> None:
        """Return the driver pool's unused memory (beyond ``keep`` bytes) to the device.
        Frees count once their stream has completed them: the caller drains first, then
        synchronizes the streams, then trims."""
        _driver_memory.mem_pool_trim(self.handle, keep)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            for arena in list(self._arenas.values()):
                arena.forget()
            _driver_memory.mem_pool_destroy(self.handle)
