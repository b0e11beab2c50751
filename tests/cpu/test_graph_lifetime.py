"""Graphs, graph-owned memory and exports of it, over the driver recorders of
reference/fake_graph.py (no GPU): a closed or dropped graph holds nothing of its inputs,
memory a DLPack consumer still holds is not handed out again, accounting is exact."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest
from reference.fake_graph import FakeSession, FakeTable, ready_graph, tensor

from tenferro_cuda import _dlpack_export, dlpack
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError
from tenferro_cuda.graph import CaptureScope
from tenferro_cuda.tensor import Tensor


def _captured(session, nbytes=4096):
    """A graph with one graph-owned output ``y`` (and its input ``x``)."""
    ctx = session._ctx
    ctx.home.pool.ordinal, ctx.home.pool.domain = 0, 1  # (the fake pool's identity)
    x = tensor(ctx)
    with CaptureScope(session) as g:
        y = Tensor._make(DType.FLOAT32, (nbytes // 4,), buffer=ctx.home.alloc(nbytes))
        ctx.capture.admit("neg", (x, y), (1,))
    return g, x, y


# --- 1. an exported graph-owned tensor ------------------------------------------------------

def test_close_does_not_hand_out_memory_a_dlpack_consumer_still_holds(driver):
    """interop.md: "The exported tensor stays alive until the consumer calls the capsule's
    deleter"; reclaim_buffer refuses while a DLPack consumer holds the memory. g.close()
    gives the block back to the arena regardless, and the next allocation of that size
    is handed the address the consumer is still reading."""
    session = FakeSession()
    ctx = session._ctx
    g, x, y = _captured(session)
    capsule = y.__dlpack__(stream=-1, max_version=(1, 0))  # a consumer holds y's memory
    exported = y.data_ptr()
    assert _dlpack_export.exports_over(y.buffer) == 1
    try:
        g.close()
    except RuntimeStateError:
        return  # refusing while a consumer holds the memory also keeps the contract
    other = ctx.home.alloc(4096)
    assert other.ptr != exported, (
        "g.close() put the memory of an exported graph-owned tensor back in the arena; "
        "the next allocation reuses the address a DLPack consumer still holds")
    del capsule


def test_dropping_the_graph_does_not_hand_out_exported_memory(driver):
    session = FakeSession()
    ctx = session._ctx
    g, x, y = _captured(session)
    capsule = y.__dlpack__(stream=-1, max_version=(1, 0))
    exported = y.data_ptr()
    del g
    gc.collect()
    other = ctx.home.alloc(4096)
    assert other.ptr != exported, (
        "dropping g released the memory of a graph-owned tensor exported through DLPack "
        "while the consumer still holds the capsule")
    del capsule


# --- 2. release on drop, no cycles --------------------------------------------------------

def test_dropped_graph_is_freed_without_the_cyclic_gc(driver):
    session = FakeSession()
    g, x, y = _captured(session)
    ref = weakref.ref(g)
    memory = g._memory
    gc.disable()
    try:
        del g
        assert ref() is None, "a dropped graph waits for the cyclic GC"
        assert memory.closed and y.buffer.home is None
    finally:
        gc.enable()


def test_rebound_graph_is_freed_without_the_cyclic_gc(driver):
    session = FakeSession()
    ctx = session._ctx
    x = tensor(ctx)
    g = ready_graph(driver, session, [x])
    g._table = FakeTable()
    other = tensor(ctx)
    g.replay(inputs={x: other})
    g.replay(inputs={x: other})  # a second executable graph for that placement
    assert g._execs is not None
    ref, oref = weakref.ref(g), weakref.ref(other.buffer)
    gc.disable()
    try:
        del g
        assert ref() is None, "a rebound graph that was dropped waits for the cyclic GC"
        del other
        assert oref() is None, "the last rebound tensor outlives the dropped graph"
    finally:
        gc.enable()


def test_discarded_capture_is_freed_without_the_cyclic_gc(driver):
    session = FakeSession()
    ctx = session._ctx
    x = tensor(ctx)
    gc.disable()
    try:
        with pytest.raises(KeyError):
            with CaptureScope(session) as g:
                y = Tensor._make(DType.FLOAT32, (4,), buffer=ctx.home.alloc(2048))
                ctx.capture.admit("neg", (x, y), (1,))
                raise KeyError("body")
        ref, mref = weakref.ref(g), weakref.ref(g._memory)
        assert y.buffer.home is None
        del g, y
        assert ref() is None and mref() is None
    finally:
        gc.enable()


# --- 3. accounting of graph memory --------------------------------------------------------

def test_graph_memory_accounting_returns_to_zero_after_close(driver):
    session = FakeSession()
    arena = session._ctx.home
    before = (arena.live_bytes, arena.live_buffers)
    g, x, y = _captured(session)
    before = (before[0] + x.buffer.nbytes, before[1] + 1)  # the input x stays live
    assert arena.live_buffers == before[1] + 1
    g.close()
    assert (arena.live_bytes, arena.live_buffers) == before
    del y
    assert (arena.live_bytes, arena.live_buffers) == before


def test_graph_dropped_on_another_thread_is_queued_not_touched(driver):
    session = FakeSession()
    arena = session._ctx.home
    before = (arena.live_bytes, arena.live_buffers)
    g, x, y = _captured(session)
    before = (before[0] + x.buffer.nbytes, before[1] + 1)  # the input x stays live
    box = [g]
    del g
    worker = threading.Thread(target=box.clear)
    worker.start()
    worker.join()
    assert y.buffer.home is None
    assert len(arena.remote) == 1  # the block waits for the owner thread
    arena.absorb()
    assert (arena.live_bytes, arena.live_buffers) == before


def test_graph_tensor_after_close_is_refused_everywhere(driver):
    session = FakeSession()
    g, x, y = _captured(session)
    view = y[1:]
    g.close()
    with pytest.raises(RuntimeStateError):
        y.__dlpack__(stream=-1)
    with pytest.raises(RuntimeStateError):
        view.__cuda_array_interface__  # noqa: B018


# --- 4. a closed graph lets go of what it kept alive --------------------------------------

def test_closed_graph_does_not_pin_its_input_tensors(driver):
    """docs/graphs.md: the tensors a capture was given are kept alive by the graph "so a
    replay never reads memory that was freed"; once g.close() ran no replay can happen,
    so a closed graph that is still referenced (an attribute, a list of graphs) must not
    keep an input the user dropped -- and its device memory -- alive."""
    session = FakeSession()
    g, x, y = _captured(session)
    ref = weakref.ref(x.buffer)
    g.close()
    del x
    gc.collect()
    assert ref() is None, ("a closed graph still holds its input tensors (CudaGraph."
                           "_external), so their device memory never goes back to the pool")


def test_an_exported_block_goes_back_when_the_consumer_lets_go(driver):
    """The block kept for a DLPack consumer after ``g.close()`` returns to the arena once
    the consumer's capsule (the last holder) is gone: the accounting ends where it began
    and the memory can be handed out again."""
    session = FakeSession()
    ctx = session._ctx
    g, x, y = _captured(session)
    capsule = y.__dlpack__(stream=-1, max_version=(1, 0))
    exported = y.data_ptr()
    g.close()
    with pytest.raises(RuntimeStateError):
        y.__dlpack__(stream=-1)  # unusable to us, though the consumer still reads it
    assert ctx.home.alloc(4096).ptr != exported
    del y, capsule
    gc.collect()
    assert _dlpack_export.live_exports() == 0  # (a look: the capsule died unconsumed)
    assert ctx.home.alloc(4096).ptr == exported  # recycled now


def test_a_held_block_is_given_back_after_the_consumer_stream_is_waited_for(driver,
                                                                        monkeypatch):
    """A block kept for a consumer on a default stream (stream=1) after ``g.close()``:
    its release orders our stream after the consumer's, then gives the block back; the
    next tensor of that size can only be written after the consumer's reads."""
    from tenferro_cuda import _driver, _foreign

    session = FakeSession()
    ctx = session._ctx
    g, x, y = _captured(session)
    ours = _driver.stream_handle(0x5150)  # (this fake's own stream is no handle)
    monkeypatch.setattr(ctx.home, "stream", ours)
    # the export finds this context through its arena, as it finds an ExecContext
    monkeypatch.setitem(_foreign._by_arena, id(ctx.home), (ctx.home, ctx))
    monkeypatch.setattr(ctx, "pending", [], raising=False)
    calls = []

    def order(c, waiter, producer):
        if waiter is ours:  # (not the export's own ordering of stream 1 after ours)
            calls.append(("order", ctx.home.lists.get(4096, []).copy()))

    monkeypatch.setattr(_foreign, "order", order)
    # a capsule whose deleter orders our stream after the default stream
    capsule = y.__dlpack__(stream=1, max_version=(1, 0))
    owner = dlpack.consume(capsule, dlpack.parse_capsule(capsule))
    exported = y.data_ptr()
    g.close()
    del y, capsule
    del owner  # the consumer lets go: its deleter orders our stream after stream 1
    assert len(calls) == 1 and exported not in calls[0][1]  # while the block was held
    assert _dlpack_export.live_exports() == 0  # (the look that lets the tensor go)
    gc.collect()
    assert ctx.home.alloc(4096).ptr == exported  # given back after the ordering
