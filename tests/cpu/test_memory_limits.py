"""The memory APIs (memory_stats, release_cached_memory, set_memory_limit,
OutOfMemoryError) over the real MemoryPool/_Arena with the driver's memory calls replaced
by a model of CUDA's stream-ordered allocator: recycled buffers are freed before the
streams are synchronized and the pool trimmed; out-of-memory errors carry the pool's
statistics, in a capture too."""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from types import SimpleNamespace

import pytest

from tenferro_cuda import _driver, memory, runtime
from tenferro_cuda.errors import OutOfMemoryError, ValidationError
from tenferro_cuda.exec import guard


class Driver:
    """CUDA's stream-ordered pool, reduced to what the tests need: ``cuMemFreeAsync``
    only enqueues the free on the stream; the memory is the pool's to trim once the
    stream has reached the free, which the host observes by a stream synchronize
    ("allocations that have been asynchronously freed but whose completion has not been
    observed on the host (eg. by a synchronize) can count as outstanding" -- the CUDA
    documentation of cuMemPoolTrimTo). ``capacity`` bounds the reserved bytes."""

    def __init__(self, capacity: int = 1 << 40) -> None:
        self.capacity = capacity
        self.addresses = itertools.count(1 << 40, 1 << 28)
        self.sizes: dict[int, int] = {}
        self.reserved = 0  # bytes the pool holds from the device
        self.idle = 0  # reserved bytes freed and observed complete: trimmable, reusable
        self.pending: dict[object, list[int]] = {}  # stream -> sizes of frees enqueued
        self.calls: list = []

    def mem_alloc_async(self, nbytes, pool, stream, op=""):
        self.calls.append(("alloc", nbytes))
        if self.idle >= nbytes:
            self.idle -= nbytes
        elif self.reserved + nbytes - self.idle > self.capacity:
            raise OutOfMemoryError(f"CUDA_ERROR_OUT_OF_MEMORY (requested {nbytes} bytes)",
                                   op=op, requested_bytes=nbytes)
        else:
            self.reserved += nbytes - self.idle
            self.idle = 0
        ptr = next(self.addresses)
        self.sizes[ptr] = nbytes
        return ptr

    def mem_free_async(self, ptr, stream):
        self.calls.append(("free", ptr))
        self.pending.setdefault(stream, []).append(self.sizes.pop(ptr))
        return 0

    def stream_synchronize(self, stream, op=""):
        self.calls.append(("sync", stream))
        self.idle += sum(self.pending.pop(stream, []))

    def mem_pool_trim(self, handle, keep):
        self.calls.append(("trim", keep))
        give = max(0, min(self.idle, self.reserved - keep))
        self.idle -= give
        self.reserved -= give

    def mem_pool_stats(self, handle):
        return {"reserved_bytes": self.reserved}


@pytest.fixture
def drv(monkeypatch):
    d = Driver()
    for name in ("mem_alloc_async", "mem_free_async", "mem_pool_trim", "mem_pool_stats"):
        monkeypatch.setattr(memory._driver_memory, name, getattr(d, name))
    monkeypatch.setattr(memory._driver_memory, "mem_pool_destroy", lambda h: None)
    monkeypatch.setattr(_driver, "stream_synchronize", d.stream_synchronize)
    monkeypatch.setattr(guard, "within", lambda c, i: contextlib.nullcontext())
    return d


def _pool() -> memory.MemoryPool:
    p = object.__new__(memory.MemoryPool)
    p.ordinal, p.context, p.domain, p.limit, p._enter = 0, None, 1, None, None
    p.handle, p._lock, p._arenas, p.closed = 7, threading.Lock(), {}, False
    return p


def _runtime(pool, streams) -> runtime.CudaRuntime:
    rt = object.__new__(runtime.CudaRuntime)
    rt.ordinal, rt.pid, rt.closed = 0, os.getpid(), False
    rt.context, rt.context_id = None, -12345
    rt._lock = threading.RLock()
    rt._contexts = [SimpleNamespace(stream=s, capture=None) for s in streams]
    rt.pool = pool
    return rt


# --- release_cached_memory -------------------------------------------------------------

def test_release_cached_memory_returns_the_recycled_buffers_to_the_device(drv):
    """session.release_cached_memory: "Return the pool's cached (freed) memory to the
    driver; waits for pending frees". The recycled buffers of the arena are freed
    (cuMemFreeAsync) by the drain inside ``trim`` -- *after* the streams were
    synchronized -- and cuMemPoolTrimTo runs at once: those frees have not been observed
    complete, so the memory stays reserved."""
    pool = _pool()
    rt = _runtime(pool, ["s"])
    arena = pool.arena("s")
    bufs = [arena.alloc(1 << 20) for _ in range(8)]
    del bufs  # recycled in the arena (no driver call)
    assert arena.cached_bytes == 8 << 20 and drv.reserved == 8 << 20
    rt.release_cached_memory()
    assert arena.cached_bytes == 0
    assert drv.reserved == 0, (
        f"{drv.reserved} bytes still reserved after release_cached_memory; calls: "
        f"{drv.calls[-12:]}")


# --- the limit's OutOfMemoryError ----------------------------------------------------------

def test_the_limit_error_carries_the_pool_statistics(drv):
    """memory.py: "exceeding it [the limit], or the device running out, raises
    OutOfMemoryError with the pool statistics"; README: "with the requested size and pool
    statistics". The device's refusal carries ``pool: {stats}``; the limit's does not."""
    pool = _pool()
    arena = pool.arena("s")
    keep = [arena.alloc(4096)]
    pool.limit = 8192
    with pytest.raises(OutOfMemoryError) as limit_err:
        arena.alloc(8192)
    assert limit_err.value.requested_bytes == 8192
    drv.capacity = 4096
    pool.limit = None
    with pytest.raises(OutOfMemoryError) as device_err:
        arena.alloc(1 << 20)
    assert "live_buffers" in str(device_err.value)  # the device's refusal: full stats
    assert "live_buffers" in str(limit_err.value), str(limit_err.value)
    assert keep


def test_the_session_is_usable_and_stats_exact_after_a_limit_error(drv):
    pool = _pool()
    arena = pool.arena("s")
    pool.limit = 1 << 20
    a = arena.alloc(512 << 10)
    before = pool.stats()
    with pytest.raises(OutOfMemoryError):
        arena.alloc(600 << 10)
    assert pool.stats() == before
    b = arena.alloc(400 << 10)
    assert pool.stats()["live_bytes"] == (512 << 10) + (400 << 10)
    del a, b
    assert pool.stats()["live_bytes"] == 0 and pool.stats()["live_buffers"] == 0


# --- set_memory_limit's argument --------------------------------------------------------

class _Fake:
    """What CudaExecSession.set_memory_limit reads of itself (the entry check passes)."""

    def __init__(self, pool):
        self._rt = SimpleNamespace(pool=pool)


@pytest.mark.parametrize("bad", [-1, True, False, 1.5, 1e9, "1024", 2.0 ** 70])
def test_set_memory_limit_refuses_bad_values(monkeypatch, bad):
    from tenferro_cuda import session as session_mod
    from tenferro_cuda.exec import entry

    monkeypatch.setattr(entry, "check", lambda *a, **k: None)
    pool = _pool()
    fake = _Fake(pool)
    with pytest.raises(ValidationError):
        session_mod.CudaExecSession.set_memory_limit(fake, bad)
    assert pool.limit is None


def test_set_memory_limit_accepts_none_zero_and_huge(monkeypatch):
    from tenferro_cuda import session as session_mod
    from tenferro_cuda.exec import entry

    monkeypatch.setattr(entry, "check", lambda *a, **k: None)
    pool = _pool()
    fake = _Fake(pool)
    for good in (0, 1 << 80, None):
        session_mod.CudaExecSession.set_memory_limit(fake, good)
        assert pool.limit == good


# --- graph memory: out of memory during a capture -------------------------------------------

class ReusingDriver(Driver):
    """As Driver, and an allocation may reuse memory whose free is still pending (the
    stream-ordered reuse of the pool: the eager path's drain-and-retry relies on it)."""

    def mem_alloc_async(self, nbytes, pool, stream, op=""):
        for s in list(self.pending):
            self.idle += sum(self.pending.pop(s))
        return super().mem_alloc_async(nbytes, pool, stream, op)


@pytest.fixture
def capture_world(driver, monkeypatch):
    from reference.fake_graph import FakeSession

    d = ReusingDriver()
    for name in ("mem_alloc_async", "mem_free_async", "mem_pool_trim", "mem_pool_stats"):
        monkeypatch.setattr(memory._driver_memory, name, getattr(d, name))
    monkeypatch.setattr(memory._driver_memory, "mem_pool_destroy", lambda h: None)
    pool = _pool()
    session = FakeSession()
    session._ctx.home = pool.arena("stream")
    return d, pool, session


def _recycle(arena, n, size):
    bufs = [arena.alloc(size) for _ in range(n)]
    del bufs
    assert arena.cached_bytes == n * size


def test_eager_out_of_memory_drains_the_recycled_buffers_and_retries(capture_world):
    """(The baseline the next test compares with: passes.)"""
    d, pool, session = capture_world
    arena = session._ctx.home
    _recycle(arena, 4, 1 << 20)
    d.capacity = 4 << 20
    big = arena.alloc(2 << 20)
    assert big.nbytes == 2 << 20 and arena.cached_bytes == 0


def test_capture_out_of_memory_carries_the_pool_statistics(capture_world):
    """An allocation during a capture that the device refuses (GraphMemory.alloc calls
    cuMemAllocFromPoolAsync itself) raises the driver's bare OutOfMemoryError: without the
    ``pool: {stats}`` the eager path's driver_alloc adds."""
    from tenferro_cuda.dtypes import DType
    from tenferro_cuda.graph import CaptureScope

    d, pool, session = capture_world
    ctx = session._ctx
    d.capacity = 1 << 20
    with pytest.raises(OutOfMemoryError) as info:
        with CaptureScope(session):
            ctx.alloc(DType.FLOAT32, (1 << 20,), "neg")  # 4 MiB
    assert info.value.requested_bytes == 4 << 20
    assert "live_buffers" in str(info.value), str(info.value)


def test_after_a_capture_out_of_memory_the_session_is_usable_and_stats_exact(capture_world):
    from tenferro_cuda.dtypes import DType
    from tenferro_cuda.graph import CaptureScope

    d, pool, session = capture_world
    ctx = session._ctx
    keep = ctx.alloc(DType.FLOAT32, (256,), "x")
    before = {k: v for k, v in pool.stats().items() if k != "reserved_bytes"}
    d.capacity = d.reserved + (1 << 20)
    with pytest.raises(OutOfMemoryError):
        with CaptureScope(session):
            ctx.alloc(DType.FLOAT32, (1 << 20,), "neg")
    assert ctx.capture is None and ctx.home.graph is None
    after = {k: v for k, v in pool.stats().items() if k != "reserved_bytes"}
    assert after == before
    t = ctx.alloc(DType.FLOAT32, (1024,), "x")
    assert t.nbytes == 4096 and keep.nbytes == 1024
