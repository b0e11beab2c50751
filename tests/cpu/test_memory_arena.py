"""The per-stream arena of the memory pool (``memory._Arena``) over a pool whose driver
calls are replaced: the recycling of small buffers and what a closed pool does with them."""

from __future__ import annotations

import itertools
import threading

import pytest

from tenferro_cuda import memory
from tenferro_cuda.errors import OutOfMemoryError


@pytest.fixture
def pool(monkeypatch):
    """A MemoryPool with counting fake driver calls (allocations at fake addresses)."""
    p = object.__new__(memory.MemoryPool)
    p.ordinal, p.context, p.domain, p.limit, p._enter = 0, None, 1, None, None
    p.handle, p._lock, p._arenas, p.closed = 7, threading.Lock(), {}, False
    addresses = itertools.count(1 << 40, 1 << 20)
    p.driver_calls = []
    p.driver_alloc = lambda nbytes, arena, op: p.driver_calls.append("alloc") or next(addresses)
    p.driver_free = lambda ptr, stream: p.driver_calls.append(("free", ptr))
    monkeypatch.setattr(memory._driver_memory, "mem_pool_destroy", lambda handle: None)
    return p


def test_a_dropped_small_buffer_is_handed_out_again_without_a_driver_call(pool):
    arena = pool.arena("stream")
    buf = arena.alloc(1000)
    ptr = buf.ptr
    del buf
    assert arena.cached_bytes == 1024 and arena.live_buffers == 0
    again = arena.alloc(1000)
    assert again.ptr == ptr and pool.driver_calls == ["alloc"]


def test_a_closed_pool_hands_out_no_recycled_pointer(pool):
    """The recycled pointers went with the pool's memory: after close, an allocation is
    refused instead of handing one out, and a buffer dying later is not kept."""
    arena = pool.arena("stream")
    first, second = arena.alloc(1000), arena.alloc(1000)
    del first
    assert arena.cached_bytes == 1024
    pool.close()
    assert arena.cached_bytes == 0 and arena.lists == {}
    with pytest.raises(OutOfMemoryError, match="closed"):
        arena.alloc(1000)
    del second  # its memory is gone with the pool: neither kept nor freed on the driver
    assert arena.lists == {} and pool.driver_calls == ["alloc", "alloc"]


def test_a_buffer_dying_on_another_thread_is_queued_for_the_owner(pool):
    arena = pool.arena("stream")
    box = [arena.alloc(1000)]
    ptr = box[0].ptr
    worker = threading.Thread(target=box.clear)
    worker.start()
    worker.join()
    assert arena.lists.get(1024) in (None, []) and list(arena.remote) == [(ptr, 1024)]
    assert arena.alloc(1000).ptr == ptr  # the owner takes it back on its next allocation


def test_a_large_buffer_is_freed_on_the_driver_not_recycled(pool):
    arena = pool.arena("stream")
    big = arena.alloc(memory.RECYCLE_LIMIT + 1)
    ptr = big.ptr
    del big
    assert arena.cached_bytes == 0 and ("free", ptr) in pool.driver_calls
