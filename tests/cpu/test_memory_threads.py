"""A buffer released on another thread while its owner's stream is capturing a graph:
docs/graphs.md -- memory freed during the capture returns to the pool when the capture
ends; a free on the capturing stream would become a graph node. Another thread's release
of a large buffer is therefore queued to the owner while a capture is in progress (the
arena's lock orders it with the capture's start and end), as a graph's memory given back
from another thread is."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from tenferro_cuda.exec.capture import GraphMemory
from tenferro_cuda.memory import RECYCLE_LIMIT, DeviceBuffer, _Arena

STREAM = object()  # the owner's (capturing) stream
BIG = RECYCLE_LIMIT + 4096


class FakePool:
    """What an arena uses of its MemoryPool; records stream-ordered frees."""

    def __init__(self) -> None:
        self.closed = False
        self.limit = None
        self.frees: list[tuple[int, object]] = []
        self.live_bytes = 0

    def driver_free(self, ptr: int, stream) -> None:
        self.frees.append((ptr, stream))


def _on_other_thread(fn) -> None:
    t = threading.Thread(target=fn)
    t.start()
    t.join()


def _capturing_arena():
    pool = FakePool()
    arena = _Arena(pool, STREAM)  # owned by this (the test's) thread
    graph = SimpleNamespace(deferred=[])
    arena.begin_graph(graph)  # what CaptureScope.__enter__ does
    return pool, arena, graph


def test_owner_thread_release_during_capture_is_deferred():
    """The reference behaviour (passes): on the owner's thread nothing reaches the
    capturing stream until the capture ends."""
    pool, arena, _ = _capturing_arena()
    arena.held_bytes = BIG
    buf = DeviceBuffer(0xB000000, BIG, arena)
    buf.release()
    assert pool.frees == []
    arena.end_graph()
    assert pool.frees == [(0xB000000, STREAM)]


def test_cross_thread_release_during_capture_is_not_enqueued_on_the_capturing_stream():
    pool, arena, _ = _capturing_arena()
    arena.held_bytes = BIG
    buf = DeviceBuffer(0xB000000, BIG, arena)
    box = [buf]
    del buf
    _on_other_thread(lambda: box.pop().release())  # the last reference dies on thread B
    # The owner is still capturing: a free on its stream now would be a graph node.
    assert pool.frees == [], (
        "a buffer released on another thread was freed with cuMemFreeAsync on the owner's "
        "stream while that stream is being captured (memory.py _Arena.give_back)")
    arena.end_graph()
    arena.absorb()
    assert [p for p, _ in pool.frees] == [0xB000000]


def test_graph_memory_closed_on_another_thread_during_a_new_capture():
    """A first graph's memory (a block above RECYCLE_LIMIT) goes back from another thread
    (CudaGraph.__del__ / close -> GraphMemory.close) while the owner captures a second
    graph: the free must not be recorded into the second capture."""
    pool = FakePool()
    arena = _Arena(pool, STREAM)
    first = GraphMemory(arena, aux_stream=object())
    first.blocks.append((0xC000000, BIG))  # a block the first graph owns
    arena.held_bytes = BIG
    arena.begin_graph(SimpleNamespace(deferred=[]))  # the second capture begins
    _on_other_thread(first.close)
    assert pool.frees == [], (
        "graph memory given back from another thread was freed on the capturing stream")
