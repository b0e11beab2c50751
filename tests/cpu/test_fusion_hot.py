"""The fusion hot path (ops/fusion/fast.py) on the emulated device: the one closure per
prepared contiguous kernel serves repeated calls (one, two, three or four compact inputs,
rank-0 and unused inputs, several outputs) without the general path and with the right
values; every call it cannot serve falls through to the general path (which raises where
it must); and a hot call makes exactly the launch the general path makes for the same
inputs: the same prepared launch, grid and head values."""

from __future__ import annotations

import numpy as np
import pytest
from test_fusion_emu import Context, Kernel, Memory, decode, fusion_session, get, put
from test_fusion_plans import make_inputs, unfused

from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import BackendSourceError, RuntimeStateError, ValidationError
from tenferro_cuda.kernels import launch as launch_mod
from tenferro_cuda.ops import fusion as fusion_ops

D = DType
P, Ins = ElementwiseFusionPlan, FusionInstruction


def _failing(*args):
    """A launch the driver refuses (CUDA_ERROR_INVALID_VALUE)."""
    raise launch_mod._Failure(1)


@pytest.fixture
def emu(monkeypatch):
    s, fdev, dev, ctx = fusion_session(monkeypatch)
    calls = []
    general = fusion_ops.general
    monkeypatch.setattr(fusion_ops, "general", lambda *args: calls.append(1) or general(*args))
    return s, fdev, ctx, calls


VARIANTS = {
    # name: (plan, dtypes, rank-0 inputs)
    "one input": (P(1, [Ins("neg", (0,)), Ins("abs", (1,))], (2,)), [D.INT8], ()),
    "two inputs": (P(2, [Ins("mul", (0, 1))], (2,)), [D.FLOAT16] * 2, ()),
    "three inputs": (P(3, [Ins("select", (0, 1, 2))], (3,)), [D.BOOL, D.COMPLEX128,
                                                              D.COMPLEX128], ()),
    "scalar input": (P(2, [Ins("sub", (0, 1))], (2,)), [D.FLOAT64] * 2, (1,)),
    "unused input": (P(3, [Ins("add", (0, 2))], (3,)), [D.INT32] * 3, ()),
    "unused rank-0 input": (P(3, [Ins("add", (0, 2))], (3,)), [D.INT32] * 3, (1,)),
    "two outputs": (P(2, [Ins("add", (0, 1)), Ins("compare", (0, 1), direction="LT")],
                      (2, 3)), [D.UINT8] * 2, ()),
    "four inputs": (P(4, [Ins("add", (0, 1)), Ins("add", (4, 2)), Ins("add", (5, 3))], (6,)),
                    [D.FLOAT32] * 4, ()),
    "only scalars": (P(2, [Ins("mul", (0, 1)), Ins("neg", (2,))], (3, 2)), [D.INT64] * 2,
                     (0, 1)),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_hot_calls_skip_the_general_path(emu, name):
    s, fdev, ctx, calls = emu
    plan, dtypes, scalar = VARIANTS[name]
    xs = [put(s, a) for a in make_inputs(1, dtypes, (6, 7), scalar)]
    s.execute_elementwise_fusion(xs, plan)
    hot = ctx.memo[plan]  # the closure sits under the plan itself
    assert hot.__qualname__ == "hot_path.<locals>.hot" and calls == [1]
    for seed in (2, 3):
        xs = [put(s, a) for a in make_inputs(seed, dtypes, (6, 7), scalar)]
        got = s.execute_elementwise_fusion(tuple(xs), plan)
        for g, w in zip(got, unfused(s, plan, xs)):
            assert g.shape == w.shape and g.is_contiguous
            assert np.array_equal(get(s, g), get(s, w), equal_nan=True)
    assert calls == [1] and len(ctx.sources) == 1


def _recording(monkeypatch):
    """Record every fused kernel's cuLaunchKernel call: (function, grid, block, shared,
    stream, parameter block address, decoded parameters)."""
    seen = []
    inner = launch_mod._launch

    def record(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        if isinstance(fn, Kernel):
            seen.append((fn, (gx, gy, gz), (bx, by, bz), shared, stream, params,
                         decode(fn.codes, params)))
        return inner(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
    monkeypatch.setattr(launch_mod, "_launch", record)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    return seen


@pytest.mark.parametrize("name", list(VARIANTS))
def test_hot_and_general_paths_make_the_same_launch(monkeypatch, name):
    s, fdev, dev, ctx = fusion_session(monkeypatch)
    queue: list = []  # buffers the next allocations return (the same outputs for both)
    real = ctx.home.alloc
    monkeypatch.setattr(ctx.home, "alloc",
                        lambda nbytes, op="": queue.pop(0) if queue else real(nbytes, op))
    plan, dtypes, scalar = VARIANTS[name]
    xs = [put(s, a) for a in make_inputs(4, dtypes, (5, 3), scalar)]
    first = s.execute_elementwise_fusion(xs, plan)  # prepares and arms the hot path
    bufs = [t.buffer for t in first]
    calls = []
    general = fusion_ops.general
    monkeypatch.setattr(fusion_ops, "general", lambda *args: calls.append(1) or general(*args))
    seen = _recording(monkeypatch)
    queue[:] = bufs
    hot = s.execute_elementwise_fusion(xs, plan)  # the hot path
    assert calls == [] and len(seen) == 1 and queue == []
    queue[:] = bufs
    gen = general(ctx, xs, plan)  # the general path, directly
    assert len(seen) == 2 and queue == []
    assert seen[0] == seen[1]  # one prepared launch, one grid, the same head and tail
    (prep,) = ctx.memo[("fusion", plan)].preps.values()
    fn, grid, block, shared, stream, params, args = seen[0]
    assert fn is prep.fn and params == prep.launch.address and stream is ctx.stream
    nptr = len(first) + sum(c != "u" for c in prep.classes)
    n = int(np.prod(first[0].shape))
    assert args[:len(first)] == [b.ptr for b in bufs] and args[nptr] == n
    assert args[nptr + 1] == 1 and args[nptr + 2:] == [prep.err, prep.cdiv, prep.cpow]
    for h, g, f in zip(hot, gen, first):
        assert h.buffer is g.buffer is f.buffer and h.shape == g.shape == f.shape
        assert h.strides == g.strides and h.dtype is g.dtype
    for g, w in zip(gen, unfused(s, plan, xs)):
        assert np.array_equal(get(s, g), get(s, w), equal_nan=True)


MISSES = {
    # name: (inputs over (s, x, y) of float32 (8,), error or None, general path taken)
    "new shape: served": (lambda s, x, y: [put(s, np.ones(9, np.float32)),
                                           put(s, np.ones(9, np.float32))], None, False),
    "view": (lambda s, x, y: [x[::1], y], None, True),
    "rank 0": (lambda s, x, y: [put(s, np.float32(2)), y], None, True),
    "empty": (lambda s, x, y: [put(s, np.ones(0, np.float32))] * 2, None, True),
    "dtype": (lambda s, x, y: [x, put(s, np.ones(8, np.float64))], ValidationError, True),
    "shape": (lambda s, x, y: [x, put(s, np.ones(9, np.float32))], ValidationError, True),
    "count": (lambda s, x, y: [x], ValidationError, True),
    "not a sequence": (lambda s, x, y: x, ValidationError, True),
    "freed": (lambda s, x, y: [x, _freed(y)], RuntimeStateError, True),
    "host tensor": (lambda s, x, y: [x, type(y).from_numpy(np.ones(8, np.float32))],
                    RuntimeStateError, True),
}


def _freed(t):
    t.buffer.release()
    return t


@pytest.mark.parametrize("name", list(MISSES))
def test_calls_the_hot_path_cannot_serve(emu, name):
    s, fdev, ctx, calls = emu
    plan = P(2, [Ins("mul", (0, 1))], (2,))
    x, y = put(s, np.full(8, 3, np.float32)), put(s, np.full(8, 2, np.float32))
    s.execute_elementwise_fusion([x, y], plan)
    build, error, general = MISSES[name]
    inputs = build(s, x, y)
    if error is not None:
        with pytest.raises(error):
            s.execute_elementwise_fusion(inputs, plan)
    else:
        got = s.execute_elementwise_fusion(inputs, plan)
        want = np.asarray(get(s, inputs[0])) * np.asarray(get(s, inputs[1]))
        assert np.array_equal(get(s, got[0]), want)
    assert calls == [1, 1] if general else calls == [1]


def test_an_unused_input_of_another_shape_takes_the_general_path(emu):
    s, fdev, ctx, calls = emu
    plan = P(3, [Ins("add", (0, 2))], (3,))
    x, z = put(s, np.arange(8, dtype=np.int32)), put(s, np.full(8, 5, np.int32))
    s.execute_elementwise_fusion([x, put(s, np.zeros(8, np.int32)), z], plan)
    got, = s.execute_elementwise_fusion([x, put(s, np.zeros(9, np.int32)), z], plan)
    assert np.array_equal(get(s, got), np.arange(8) + 5) and calls == [1, 1]


def test_a_tensor_of_another_context_takes_the_general_path(emu):
    s, fdev, ctx, calls = emu
    plan = P(2, [Ins("mul", (0, 1))], (2,))
    x, y = put(s, np.full(8, 3, np.float32)), put(s, np.full(8, 2, np.float32))
    s.execute_elementwise_fusion([x, y], plan)
    foreign = Context(Memory()).alloc(D.FLOAT32, (8,), "test")  # another home
    with pytest.raises(RuntimeStateError, match=r"inputs\[1\]"):
        s.execute_elementwise_fusion([x, foreign], plan)
    assert calls == [1, 1]


def test_a_failed_hot_launch_raises_the_typed_error(emu, monkeypatch):
    s, fdev, ctx, calls = emu
    plan = P(2, [Ins("mul", (0, 1))], (2,))
    x, y = put(s, np.full(8, 3, np.float32)), put(s, np.full(8, 2, np.float32))
    s.execute_elementwise_fusion([x, y], plan)  # the general path launches; closure made
    monkeypatch.setattr(launch_mod, "_launch", _failing)  # CUDA_ERROR_INVALID_VALUE
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    with pytest.raises(BackendSourceError, match="cuLaunchKernel") as info:
        s.execute_elementwise_fusion([x, y], plan)
    assert info.value.op == "execute_elementwise_fusion" and calls == [1]
