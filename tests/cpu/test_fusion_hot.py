"""The fusion hot path (ops/fusion_fast.py) on the emulated device: every closure variant
(written out for one, two and three compact inputs and one output, general for scalars,
unused inputs and several outputs) serves repeated calls without the general path and with the
right values; every call it cannot serve falls through to the general path (which raises
where it must); its parameter block matches the kernel's ArgPack byte for byte."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from test_elementwise_emu import get, put
from test_fusion_emu import fusion_session
from test_fusion_plans import make_inputs, unfused

from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import BackendSourceError, RuntimeStateError, ValidationError
from tenferro_cuda.fusion_codegen import arg_codes, spec_for
from tenferro_cuda.kernels import device
from tenferro_cuda.kernels.args import ArgPack
from tenferro_cuda.ops import fusion as fusion_ops
from tenferro_cuda.ops.fusion_fast import HotBlock
from tenferro_cuda.shapes.fusion import type_plan

D = DType
P, Ins = ElementwiseFusionPlan, FusionInstruction


@pytest.fixture
def emu(monkeypatch):
    s, fdev, dev, rt = fusion_session(monkeypatch)
    calls = []
    general = fusion_ops.FusionOps._fusion_general
    monkeypatch.setattr(fusion_ops.FusionOps, "_fusion_general",
                        lambda *args: calls.append(1) or general(*args))
    return s, fdev, rt, calls


VARIANTS = {
    # name: (plan, dtypes, rank-0 inputs, closure)
    "one input": (P(1, [Ins("neg", (0,)), Ins("abs", (1,))], (2,)), [D.INT8], (), "_one"),
    "two inputs": (P(2, [Ins("mul", (0, 1))], (2,)), [D.FLOAT16] * 2, (), "_two"),
    "three inputs": (P(3, [Ins("select", (0, 1, 2))], (3,)), [D.BOOL, D.COMPLEX128,
                                                              D.COMPLEX128], (), "_three"),
    "scalar input": (P(2, [Ins("sub", (0, 1))], (2,)), [D.FLOAT64] * 2, (1,), "_general"),
    "unused input": (P(3, [Ins("add", (0, 2))], (3,)), [D.INT32] * 3, (), "_general"),
    "two outputs": (P(2, [Ins("add", (0, 1)), Ins("compare", (0, 1), direction="LT")],
                      (2, 3)), [D.UINT8] * 2, (), "_general"),
    "four inputs": (P(4, [Ins("add", (0, 1)), Ins("add", (4, 2)), Ins("add", (5, 3))], (6,)),
                    [D.FLOAT32] * 4, (), "_general"),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_hot_calls_skip_the_general_path(emu, name):
    s, fdev, rt, calls = emu
    plan, dtypes, scalar, closure = VARIANTS[name]
    arrays = make_inputs(1, dtypes, (6, 7), scalar)
    xs = [put(s, a) for a in arrays]
    s.execute_elementwise_fusion(xs, plan)
    hot = s._state.prepared[plan]  # the closure sits under the plan itself
    assert hot.__qualname__.startswith(closure + ".") and calls == [1]
    for seed in (2, 3):
        arrays = make_inputs(seed, dtypes, (6, 7), scalar)
        xs = [put(s, a) for a in arrays]
        got = s.execute_elementwise_fusion(tuple(xs), plan)
        for g, w in zip(got, unfused(s, plan, xs)):
            assert g.shape == w.shape and np.array_equal(get(s, g), get(s, w), equal_nan=True)
    assert calls == [1] and len(rt.sources) == 1


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
}


def _freed(t):
    t.buffer.freed = True
    return t


@pytest.mark.parametrize("name", list(MISSES))
def test_calls_the_hot_path_cannot_serve(emu, name):
    s, fdev, rt, calls = emu
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


@pytest.mark.parametrize("classes,outputs", [("cc", 1), ("cs", 1), ("cuc", 2), ("s", 3)])
def test_hot_block_matches_the_argpack(classes, outputs):
    n = len(classes)
    plan = P(n, [Ins("neg", (k,)) for k in range(n) if classes[k] != "u"][:1]
             + [Ins("abs", (n,))] * (outputs - 1), tuple(range(n, n + outputs)))
    typed = type_plan(plan, (D.FLOAT32,) * n, [c == "s" for c in classes], "t")
    live = "".join(c if typed.live[k] else "u" for k, c in enumerate(classes))
    codes = arg_codes(spec_for(typed, live, "contig"))
    nptr = codes.count("P") - 1
    values = [0x1000 * (k + 1) for k in range(nptr)] + [12345, 1]
    hot = HotBlock(nptr, 0xABCDEF0, 7, 9)
    pack = ArgPack(codes)
    a = hot.pack(*values)
    b = pack.pack(*values, 0xABCDEF0, 7, 9)
    sizes = {"P": 8, "I": 4, "i": 4}
    pa = (ctypes.c_void_p * len(codes)).from_address(a)
    pb = (ctypes.c_void_p * len(codes)).from_address(b)
    for k, code in enumerate(codes):
        assert ctypes.string_at(pa[k], sizes[code]) == ctypes.string_at(pb[k], sizes[code])


def test_a_failed_hot_launch_raises_the_typed_error(emu, monkeypatch):
    s, fdev, rt, calls = emu
    monkeypatch.setattr(device, "raw_launch", lambda *args: (1,))  # CUDA_ERROR_INVALID_VALUE
    plan = P(2, [Ins("mul", (0, 1))], (2,))
    x, y = put(s, np.full(8, 3, np.float32)), put(s, np.full(8, 2, np.float32))
    s.execute_elementwise_fusion([x, y], plan)  # the general path launches; closure made
    with pytest.raises(BackendSourceError, match="cuLaunchKernel") as info:
        s.execute_elementwise_fusion([x, y], plan)
    assert info.value.op == "execute_elementwise_fusion" and calls == [1]
