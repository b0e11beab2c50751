"""The capture state machine, graph memory and rebinding validation, with the driver's
graph calls replaced by recorders (no GPU): what is refused, what is noted, what the
arena does during a capture, and every rebinding error before anything is enqueued."""

from __future__ import annotations

import pytest
from reference.fake_graph import FakeCtx, FakeSession, FakeTable, ready_graph, tensor

from tenferro_cuda import _driver_graph
from tenferro_cuda import graph as graph_module
from tenferro_cuda.authority import Scope
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.exec import capture as cap
from tenferro_cuda.graph import CaptureScope, CudaGraph
from tenferro_cuda.graph_rebind import NodeTable
from tenferro_cuda.memory import DeviceBuffer
from tenferro_cuda.raw import RawSession
from tenferro_cuda.tensor import Tensor


def test_every_refused_name_is_a_session_method():
    from tenferro_cuda.session import CudaExecSession

    for name in cap.NOT_CAPTURABLE:
        assert callable(getattr(CudaExecSession, name)), name
    assert cap.TABLE_OPS <= cap.BLAS_OPS


def test_capture_records_and_instantiates(driver):
    session = FakeSession()
    ctx = session._ctx
    x = tensor(ctx)
    with CaptureScope(session) as g:
        assert driver.begin == [7] and ctx.capture is not None and not ctx.eager
        assert ctx.home.graph is ctx.capture.memory
        y = Tensor._make(DType.FLOAT32, (4,), buffer=ctx.home.alloc(16))  # graph memory
        ctx.capture.admit("add", (x, [y], {"k": x}, 3))
        assert repr(g) == "<CudaGraph capturing>"
        with pytest.raises(RuntimeStateError, match="still being captured"):
            g.replay()
    assert driver.end == [7] and driver.instantiate == [0xA001]
    assert ctx.capture is None and ctx.eager and ctx.home.graph is None
    assert driver.allocs == [(512, 99)] and driver.syncs == [99]  # on the auxiliary stream
    assert y.buffer.owner is g._memory
    assert [id(t) for t in g.inputs] == [id(x)] and g.ops == ("add",)
    assert g._exec == 0xE000 + 0xA001
    g.close()
    assert y.buffer.home is None and g.closed
    assert ("cuGraphExecDestroy", 0xE000 + 0xA001) in driver.lib.calls


@pytest.mark.parametrize("op", sorted(cap.NOT_CAPTURABLE))
def test_refused_op_abandons_the_capture(driver, op):
    session = FakeSession()
    ctx = session._ctx
    with pytest.raises(RuntimeStateError, match="not allowed during capture") as info:
        with CaptureScope(session):
            with pytest.raises(RuntimeStateError, match=op):
                ctx.capture.admit(op, ())
            assert ctx.capture is None and ctx.eager  # the stream is usable at once
    assert info.value.op == op
    assert driver.end == [7] and driver.instantiate == []
    assert ("cuGraphDestroy", 0xA001) in driver.lib.calls


def test_a_raw_download_is_refused_under_its_own_name(driver):
    session = FakeSession()
    raw = RawSession._make(session, session._ctx, Scope("raw", session._scope), "test.raw")
    x = tensor(session._ctx)
    with pytest.raises(RuntimeStateError, match="download_tensor is not allowed") as info:
        with CaptureScope(session):
            raw.download_tensor(x)
    assert info.value.op == "download_tensor"
    assert session._ctx.capture is None and driver.instantiate == []


def test_nested_capture_and_a_scope_entered_twice(driver):
    session = FakeSession()
    scope = CaptureScope(session)
    with pytest.raises(RuntimeStateError, match="capture is not allowed during capture"):
        with scope:
            with CaptureScope(session):
                pass
    with pytest.raises(ValidationError, match="entered once"):
        scope.__enter__()


def test_exception_discards_and_a_failed_end_raises(driver):
    session = FakeSession()
    with pytest.raises(KeyError):
        with CaptureScope(session) as g:
            raise KeyError("body")
    assert driver.instantiate == [] and g.closed and session._ctx.eager
    driver.end_status = _driver_graph.CAPTURE_INVALIDATED
    with pytest.raises(RuntimeStateError, match="capture failed"):
        with CaptureScope(session):
            pass
    assert session._ctx.capture is None and session._ctx.eager


def test_arena_during_capture(driver):
    ctx = FakeCtx()
    arena = ctx.home
    recycled = arena.alloc(4096)
    rptr = recycled.ptr
    del recycled  # back to the arena's list
    assert arena.lists[4096] == [rptr]
    early = arena.alloc(512)
    memory = cap.GraphMemory(arena, 99)
    arena.begin_graph(memory)
    taken = arena.alloc(4096)  # a recycled block, taken for good
    assert taken.ptr == rptr and taken.owner is memory and taken.home is arena
    fresh = arena.alloc(1000)
    assert fresh.nbytes == 1024 and driver.allocs[-1] == (1024, 99)
    eptr = early.ptr
    del early  # a free during the capture waits
    assert memory.deferred == [(eptr, 512)] and arena.lists == {}
    arena.end_graph()
    assert arena.lists[512] == [eptr] and 4096 in arena.lists and not arena.lists[4096]
    del taken  # graph memory is not recycled by its buffers
    assert not arena.lists[4096]
    memory.close()
    assert rptr in arena.lists[4096] and fresh.home is None
    assert arena.live_buffers == 0


def test_graph_memory_respects_the_pool_limit(driver):
    ctx = FakeCtx()
    ctx.home.pool.limit = 100
    memory = cap.GraphMemory(ctx.home, 99)
    ctx.home.begin_graph(memory)
    from tenferro_cuda.errors import OutOfMemoryError

    with pytest.raises(OutOfMemoryError):
        ctx.home.alloc(512, "add")
    ctx.home.end_graph()


def test_rebinding_moves_sites_and_restores_them(driver):
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    a, b = tensor(ctx), tensor(ctx)
    g = ready_graph(driver, session, [a, b])
    g._table = table = FakeTable()
    a2 = tensor(ctx)
    exe = g._rebind(ctx, {a: a2})  # a second executable graph, bound to a2
    lo = a.data_ptr()
    # (the fake table has one site per range asked for: here a's allocation)
    assert table.moves == [((lo, lo + a.buffer.nbytes), a2.data_ptr() - lo)]
    assert table.pushes == 1
    assert exe != g._exec and driver.instantiate == [0xA1]
    assert g._rebind(ctx, {a: a2}) == exe  # the same binding: nothing moves
    # back to the captured tensors: the first executable graph still holds them
    assert g._rebind(ctx, {}) == g._exec and len(table.moves) == 1 and table.pushes == 1


def test_a_tensor_bound_to_itself_is_the_placement_without_it(driver):
    """Naming a captured tensor with itself moves nothing: the replay launches the
    executable graph of the placement that leaves it out, and nothing is pushed again."""
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    a, b = tensor(ctx), tensor(ctx)
    g = ready_graph(driver, session, [a, b])
    g._table = table = FakeTable()
    assert g._rebind(ctx, {a: a}) == g._exec and g._rebind(ctx, {a: a, b: b}) == g._exec
    b2 = tensor(ctx)
    exe = g._rebind(ctx, {b: b2})
    pushes = table.pushes
    assert g._rebind(ctx, {a: a, b: b2}) == exe and table.pushes == pushes
    assert g._rebind(ctx, {b: b2, a: a}) == exe and len(g._placements) == 2


def test_each_replay_launches_the_executable_graph_of_its_placement(driver):
    """``_launch``: the capture's executable graph until a rebinding; then the one bound
    to the replay's placement (plain replays: the captured tensors'), and every one of
    them destroyed by ``close``. Inputs that are not a mapping are refused, even empty."""
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    a = tensor(ctx)
    g = ready_graph(driver, session, [a])
    g._table = FakeTable()
    launched = lambda: [c[1] for c in driver.lib.calls if c[0] == "cuGraphLaunch"]  # noqa: E731
    assert g._launch(ctx, None) == 0 and launched() == [0xE1]
    a2 = tensor(ctx)
    g._launch(ctx, {a: a2})
    g._launch(ctx, None)
    g._launch(ctx, {a: a2})
    assert launched() == [0xE1, 0xE0A1, 0xE1, 0xE0A1] and g._table.pushes == 1
    for bad in ([], (), 0, [(a, a2)]):
        with pytest.raises(ValidationError, match="mapping"):
            g._launch(ctx, bad)
    assert len(launched()) == 4
    g._release()
    destroyed = [c[1] for c in driver.lib.calls if c[0] == "cuGraphExecDestroy"]
    assert sorted(destroyed) == [0xE1, 0xE0A1] and g._execs is None and not g._exec


def test_rebinding_errors(driver):
    session = FakeSession()
    ctx = session._ctx
    a, b = tensor(ctx), tensor(ctx)
    own = tensor(ctx)
    g = ready_graph(driver, session, [a, b], blocks=[(own.buffer.ptr, own.buffer.nbytes)])
    g._table = FakeTable()
    view_of_b = Tensor._make(DType.FLOAT32, (4,), buffer=b.buffer)
    cases = [
        ([(a, a)], "mapping"),
        ({tensor(ctx): a}, "captured with"),
        ({a: "x"}, "must be tensors"),
        ({a: Tensor._make(DType.FLOAT32, (4,), host=object())}, "host tensor"),
        ({a: tensor(ctx, (2, 2))}, "dtype, shape and strides"),
        ({a: tensor(ctx, (4,), DType.INT32)}, "dtype, shape and strides"),
        ({a: own}, "graph owns"),
        ({a: view_of_b}, "did not overlap"),
    ]
    for _ in range(2):  # a refused placement is not remembered: refused again
        for inputs, words in cases:
            with pytest.raises((ValidationError, RuntimeStateError), match=words):
                g._rebind(ctx, inputs)
    assert g._table.moves == []
    g._fixed.add(id(a))
    with pytest.raises(ValidationError, match="pointer table"):
        g._rebind(ctx, {a: tensor(ctx)})


def test_an_accepted_placement_is_checked_once(driver, monkeypatch):
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    a, b = tensor(ctx), tensor(ctx)
    g = ready_graph(driver, session, [a, b])
    g._table = FakeTable()
    checks = []
    real = graph_module.check_placement
    monkeypatch.setattr(graph_module, "check_placement",
                        lambda graph, shifts, op: checks.append(dict(shifts)) or real(
                            graph, shifts, op))
    a2, a3 = tensor(ctx), tensor(ctx)
    for new in (a2, a3, a2, a3, a2):
        g._rebind(ctx, {a: new})
    assert [list(c.values()) for c in checks] == [[a2.data_ptr() - a.data_ptr()],
                                                  [a3.data_ptr() - a.data_ptr()]]
    # a2 got a second executable graph, a3 the first one (the least recently used): each
    # was moved and pushed once, and the three replays after found theirs bound already
    assert [shift for _, shift in g._table.moves] == [a2.data_ptr() - a.data_ptr(),
                                                      a3.data_ptr() - a.data_ptr()]
    assert g._table.pushes == 2 and driver.instantiate == [0xA1]


def test_node_table_finds_and_moves_addresses():
    class Entry:
        def __init__(self, words):
            self.values, self.pushed = dict(words), []

        def write(self, where, value):
            self.values[where] = value

        def push(self, exe, context):
            self.pushed.append((exe, dict(self.values)))

    base = 0x7F0000001000
    e1, e2 = Entry({(0, 0): base + 64, (1, 0): 12}), Entry({"dst": base + 4096})
    table = object.__new__(NodeTable)
    table.nodes = [e1, e2]
    table._sites = [(e, w, v) for e in (e1, e2) for w, v in e.values.items() if v >= 1 << 16]
    sites = table.sites(base, base + 128)
    assert [(s[1], s[2]) for s in sites] == [((0, 0), base + 64)]
    table.move(sites, 0x1000)
    table.move(sites, 0x3000)  # from the original value, not from the last one
    assert e1.values == {(0, 0): base + 64 + 0x3000, (1, 0): 12} and e1.pushed == []
    table.push(7, [e1], 2)
    assert e1.pushed == [(7, {(0, 0): base + 64 + 0x3000, (1, 0): 12})] and e2.pushed == []


def test_kernel_words_scan_only_8_byte_parameters():
    import ctypes

    from tenferro_cuda.graph_rebind import _Kernel

    k = object.__new__(_Kernel)
    k.sizes = [8, 4, 24]
    k.buffers = [ctypes.create_string_buffer(bytes(range(8)), 8),
                 ctypes.create_string_buffer(b"\1\2\3\4", 8),
                 ctypes.create_string_buffer(bytes(24), 24)]
    assert [w for w, _ in k.words()] == [(0, 0), (2, 0), (2, 8), (2, 16)]


def test_graph_refuses_copies_and_construction():
    import copy
    import pickle

    with pytest.raises(TypeError):
        CudaGraph()
    g = object.__new__(CudaGraph)
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError):
            attempt(g)


def test_device_buffer_of_graph_memory_is_not_recycled(driver):
    ctx = FakeCtx()
    memory = cap.GraphMemory(ctx.home, 99)
    buf = DeviceBuffer(0x7F0000100000, 512, ctx.home, owner=memory)
    buf.release()
    assert buf.home is None and ctx.home.lists == {}


def test_constant_tables_go_to_graph_memory_on_the_auxiliary_stream(driver, monkeypatch):
    import numpy as np

    copies = []
    monkeypatch.setattr(cap._driver_memory, "memcpy_htod_async",
                        lambda dst, src, n, stream, op="": copies.append((dst, n, stream)))
    ctx = FakeCtx()
    state = cap.CaptureState(ctx, cap.GraphMemory(ctx.home, 99))
    ctx.home.begin_graph(state.memory)
    table = ctx.home.alloc(64)
    data = np.arange(8, dtype=np.int64)
    state.upload_constant(table.ptr, data, "grouped_gemm")
    assert copies == [(table.ptr, 64, 99)] and state.memory.constants == [data]
    eager = tensor(FakeCtx())
    with pytest.raises(RuntimeStateError, match="graph's memory"):
        state.upload_constant(eager.buffer.ptr, data, "grouped_gemm")
    state.memory.settle("capture")
    assert state.memory.constants == [] and driver.syncs == [99]
    ctx.home.end_graph()


def test_grouped_gemm_jobs_are_noted_and_fixed(driver):
    from tenferro_cuda.configs.dot import GemmJob, GroupedGemmConfig

    ctx = FakeCtx()
    state = cap.CaptureState(ctx, cap.GraphMemory(ctx.home, 99))
    a = Tensor._make(DType.FLOAT32, (2, 3), buffer=ctx.home.alloc(64))
    b = Tensor._make(DType.FLOAT32, (3, 2), buffer=ctx.home.alloc(64))
    c = Tensor._make(DType.FLOAT32, (2, 2), buffer=ctx.home.alloc(64))
    state.admit("grouped_gemm", (GroupedGemmConfig((GemmJob(a, b, c),)),))
    assert set(state.external) == {id(a), id(b), id(c)} == state.table_users


def test_a_rebound_graph_dropped_is_released_at_once(driver):
    """docs/graphs.md: dropping ``g`` releases the graph: its executable graphs (a
    rebinding made a second one) are destroyed when the last reference goes, not at some
    later garbage collection (no reference cycle through the rebinding machinery)."""
    import gc
    import weakref

    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    a = tensor(ctx)
    g = ready_graph(driver, session, [a])
    g._table = FakeTable()
    a2 = tensor(ctx)
    g._launch(ctx, {a: a2})
    g._launch(ctx, {a: a2})  # seen twice: an executable graph of its own
    alive = weakref.ref(g)
    gc.disable()
    try:
        del g
        assert alive() is None
    finally:
        gc.enable()
    destroyed = [c[1] for c in driver.lib.calls if c[0] == "cuGraphExecDestroy"]
    assert sorted(destroyed) == [0xE1, 0xE0A1]
