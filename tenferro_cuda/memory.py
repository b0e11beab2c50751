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
- Small buffers (up to ``SMALL_LIMIT`` bytes) released on a stream are kept in a per-stream
  free list and handed out again on that same stream without a driver call: reuse on the
  stream that freed them is ordered after every earlier use (the rule the driver's own
  stream-ordered pool follows). ``trim`` returns them to the pool first.
- An optional limit bounds the bytes live in the pool; exceeding it, or the device
  running out, raises ``OutOfMemoryError`` with the pool statistics and leaves the
  session usable.
"""

from __future__ import annotations

import itertools
import sys
import threading

from . import _driver
from .errors import OutOfMemoryError

_alloc_ids = itertools.count(1)
_INVALID_CONTEXT = 201
SMALL_LIMIT = 1 << 20  # buffers up to 1 MiB are recycled per stream
SMALL_CACHE_BYTES = 64 << 20  # at most this much idles in the free lists
_GRANULE = 512


def _bucket(nbytes: int) -> int:
    return -(-nbytes // _GRANULE) * _GRANULE


class DeviceBuffer:
    """One stream-ordered allocation (or a zero-byte placeholder with ``ptr == 0``)."""

    __slots__ = ("ptr", "nbytes", "domain", "alloc_id", "ordinal", "stream", "pool",
                 "freed", "owner", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, pool: MemoryPool | None, stream, domain: int,
                 ordinal: int, owner: object = None) -> None:
        self.ptr = ptr
        self.nbytes = nbytes
        self.pool = pool
        self.stream = stream
        self.domain = domain
        self.ordinal = ordinal
        self.alloc_id = next(_alloc_ids)
        self.freed = False
        self.owner = owner  # keeps a foreign producer alive (adopted buffers)

    def release(self) -> None:
        """Free now (stream-ordered); idempotent, never raises."""
        if self.freed:
            return
        self.freed = True
        pool = self.pool
        if pool is not None and self.ptr and not sys.is_finalizing():
            pool.free(self.ptr, self.nbytes, self.stream)
        self.owner = None

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - a finalizer must never raise
            pass

    def __repr__(self) -> str:
        state = "freed" if self.freed else "live"
        return f"DeviceBuffer(0x{self.ptr:x}, {self.nbytes} B, id={self.alloc_id}, {state})"


class MemoryPool:
    """The runtime's stream-ordered pool with statistics and an optional byte limit."""

    def __init__(self, ordinal: int, context, domain: int, limit: int | None = None) -> None:
        self.ordinal = ordinal
        self.context = context
        self.domain = domain
        self.limit = limit
        self.handle = _driver.mem_pool_create(ordinal)
        self._lock = threading.Lock()
        self.live_bytes = 0
        self.live_buffers = 0
        self.allocations = 0
        self.frees = 0
        self.closed = False
        self.cached_bytes = 0
        self._lists: dict[tuple[int, int], list[int]] = {}
        self._streams: dict[int, object] = {}

    def alloc(self, nbytes: int, stream, op: str = "") -> DeviceBuffer:
        if nbytes <= 0:
            return DeviceBuffer(0, 0, None, stream, self.domain, self.ordinal)
        size = _bucket(nbytes) if nbytes <= SMALL_LIMIT else nbytes
        if size <= SMALL_LIMIT:
            free = self._lists.get((id(stream), size))
            if free:
                with self._lock:
                    ptr = free.pop() if free else 0
                    if ptr:
                        self.cached_bytes -= size
                        self.live_bytes += size
                        self.live_buffers += 1
                        self.allocations += 1
                if ptr:
                    return DeviceBuffer(ptr, size, self, stream, self.domain, self.ordinal)
        nbytes = size
        if self.limit is not None and self.live_bytes + nbytes > self.limit:
            raise OutOfMemoryError(
                f"allocating {nbytes} bytes would exceed the pool limit of {self.limit} "
                f"bytes ({self.live_bytes} live)",
                op=op,
                requested_bytes=nbytes,
            )
        try:
            try:
                ptr = _driver.mem_alloc_async(nbytes, self.handle, stream, op)
            except OutOfMemoryError:
                if not self.cached_bytes:
                    raise
                self.drain()  # give the recycled small buffers back and try once more
                ptr = _driver.mem_alloc_async(nbytes, self.handle, stream, op)
        except OutOfMemoryError as exc:
            raise OutOfMemoryError(
                f"{exc.args[0]}; pool: {self.stats()}", op=op, requested_bytes=nbytes
            ) from exc.__cause__
        with self._lock:
            self.live_bytes += nbytes
            self.live_buffers += 1
            self.allocations += 1
        return DeviceBuffer(ptr, nbytes, self, stream, self.domain, self.ordinal)

    def free(self, ptr: int, nbytes: int, stream) -> None:
        """Stream-ordered free; never raises (called from ``__del__``)."""
        if self.closed:
            return
        if nbytes <= SMALL_LIMIT and self.cached_bytes + nbytes <= SMALL_CACHE_BYTES:
            key = (id(stream), nbytes)
            with self._lock:
                free = self._lists.get(key)
                if free is None:
                    free = self._lists[key] = []
                    self._streams[id(stream)] = stream
                free.append(ptr)
                self.cached_bytes += nbytes
                self.live_bytes -= nbytes
                self.live_buffers -= 1
                self.frees += 1
            return
        self._driver_free(ptr, nbytes, stream)
        with self._lock:
            self.live_bytes -= nbytes
            self.live_buffers -= 1
            self.frees += 1

    def drain(self) -> None:
        """Return every recycled small buffer to the driver pool (stream-ordered)."""
        with self._lock:
            lists, self._lists = self._lists, {}
        for (sid, size), ptrs in lists.items():
            stream = self._streams[sid]
            for ptr in ptrs:
                self._driver_free(ptr, size, stream)
            with self._lock:
                self.cached_bytes -= size * len(ptrs)

    def _driver_free(self, ptr: int, nbytes: int, stream) -> None:
        status = _driver.mem_free_async(ptr, stream)
        if status == _INVALID_CONTEXT:  # no current context on this thread: enter ours
            try:
                _driver.ctx_push(self.context)
                try:
                    status = _driver.mem_free_async(ptr, stream)
                finally:
                    _driver.ctx_pop()
            except Exception:  # noqa: BLE001 - a lost context frees everything anyway
                return

    def stats(self) -> dict[str, int | None]:
        out: dict[str, int | None] = {
            "live_bytes": self.live_bytes,
            "live_buffers": self.live_buffers,
            "allocations": self.allocations,
            "frees": self.frees,
            "limit": self.limit,
            "recycled_bytes": self.cached_bytes,
        }
        if not self.closed:
            out.update(_driver.mem_pool_stats(self.handle))
        return out

    def trim(self, keep: int = 0) -> None:
        """Return cached memory (beyond ``keep`` bytes) to the driver (the caller has
        synchronized the streams so that stream-ordered frees have completed)."""
        self.drain()
        _driver.mem_pool_trim(self.handle, keep)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _driver.mem_pool_destroy(self.handle)
