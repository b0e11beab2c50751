"""execute_elementwise_fusion on the emulated device: declined plans return None and
invalid calls raise typed errors, both before anything is allocated, compiled or
launched; new shapes and equal plans never compile again."""

from __future__ import annotations

import numpy as np
import pytest
from test_fusion_emu import fusion_session, get, put
from test_fusion_plans import PLANS

from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.errors import (
    RuntimeStateError,
    UnsupportedDTypeConversionError,
    UnsupportedDTypeError,
    ValidationError,
)
from tenferro_cuda.tensor import Tensor

P, Ins = ElementwiseFusionPlan, FusionInstruction


@pytest.fixture
def emu(monkeypatch):
    return fusion_session(monkeypatch)


def _chain(n_inputs: int, n_ops: int, n_outputs: int = 1) -> ElementwiseFusionPlan:
    ops: list[FusionInstruction] = []
    acc = 0
    for k in range(1, n_inputs):
        ops.append(Ins("add", (acc, k)))
        acc = n_inputs + len(ops) - 1
    while len(ops) < n_ops:
        ops.append(Ins("neg", (acc,)))
        acc = n_inputs + len(ops) - 1
    return P(n_inputs, ops, (acc,) * n_outputs)


def _f32(s, shape):
    return put(s, np.ones(shape, np.float32))


DECLINED = {
    # name: (plan, input builders)
    "outputs rank 0 and not": (P(2, [Ins("neg", (0,)), Ins("neg", (1,))], (2, 3)),
                               [lambda s: _f32(s, ()), lambda s: _f32(s, (4,))]),
    "outputs of unrelated shapes": (P(2, [Ins("neg", (0,)), Ins("neg", (1,))], (2, 3)),
                                    [lambda s: _f32(s, (3,)), lambda s: _f32(s, (4,))]),
    "17 inputs": (_chain(17, 16), [lambda s: _f32(s, (4,))] * 17),
    "9 outputs": (_chain(2, 1, 9), [lambda s: _f32(s, (4,))] * 2),
    "257 instructions": (_chain(1, 257), [lambda s: _f32(s, (4,))]),
    "9 strided axes": (P(1, [Ins("neg", (0,))], (1,)),
                       [lambda s: _f32(s, (2,) * 9).permute(tuple(range(8, -1, -1)))]),
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_declined_plans_return_none_and_do_nothing(emu, name):
    s, fdev, dev, ctx = emu
    plan, builders = DECLINED[name]
    inputs = [b(s) for b in builders]
    allocs, launches = ctx.allocs, len(fdev.launches)
    assert s.execute_elementwise_fusion(inputs, plan) is None
    assert ctx.allocs == allocs and len(fdev.launches) == launches and ctx.sources == []


def _i32(s, shape=(4,)):
    return put(s, np.ones(shape, np.int32))


INVALID = {
    # name: (plan, input builders, error, kind or None, text)
    "too few inputs": (PLANS["exp_mul_add"], [lambda s: _f32(s, (4,))], ValidationError,
                       "invalid_argument", "takes 2 input(s) (got 1)"),
    "too many inputs": (PLANS["exp_mul_add"], [lambda s: _f32(s, (4,))] * 3, ValidationError,
                        "invalid_argument", "(got 3)"),
    "dtype mismatch": (PLANS["exp_mul_add"], [lambda s: _f32(s, (4,)), _i32], ValidationError,
                       "dtype_mismatch", "instruction 1 (mul(v2, v1)"),
    "undefined for dtype": (PLANS["exp_mul_add"], [_i32, _i32], UnsupportedDTypeError, None,
                            "exp is not defined for int32"),
    "convert off lattice": (P(1, [Ins("convert", (0,), to="int8")], (1,)), [_i32],
                            UnsupportedDTypeConversionError, None, "int32 -> int8"),
    "shape mismatch": (PLANS["exp_mul_add"], [lambda s: _f32(s, (4,)), lambda s: _f32(s, (5,))],
                       ValidationError, "shape_mismatch", "(4,) vs (5,)"),
    "host input": (PLANS["exp_mul_add"], [lambda s: _f32(s, (4,)),
                                          lambda s: Tensor.from_numpy(np.ones(4, np.float32))],
                   RuntimeStateError, None, "inputs[1]: expected a device tensor"),
    "reclaimed input": (PLANS["exp_mul_add"], [lambda s: _f32(s, (4,)), lambda s: _freed(s)],
                        RuntimeStateError, None, "reclaimed"),
    "input not a tensor": (PLANS["exp_mul_add"], [lambda s: _f32(s, (4,)), lambda s: 3.0],
                           ValidationError, "invalid_argument", "inputs[1] must be a Tensor"),
}


def _freed(s):
    t = _f32(s, (4,))
    t.buffer.release()
    return t


@pytest.mark.parametrize("name", list(INVALID))
def test_invalid_calls_raise_before_anything_happens(emu, name):
    s, fdev, dev, ctx = emu
    plan, builders, exc, kind, text = INVALID[name]
    inputs = [b(s) for b in builders]
    allocs, launches = ctx.allocs, len(fdev.launches)
    for _ in range(2):  # the second time through the cached entry
        with pytest.raises(exc) as info:
            s.execute_elementwise_fusion(inputs, plan)
        assert text in str(info.value) and info.value.op == "execute_elementwise_fusion"
        if kind:
            assert info.value.kind == kind
    assert ctx.allocs == allocs and len(fdev.launches) == launches and ctx.sources == []


BAD_ARGUMENTS = {
    "plan is a list": (lambda s: [_f32(s, (4,))], lambda: [Ins("neg", (0,))], "plan must be"),
    "inputs is a tensor": (lambda s: _f32(s, (4,)), lambda: PLANS["exp_mul_add"],
                           "inputs must be a sequence"),
    "inputs is None": (lambda s: None, lambda: PLANS["exp_mul_add"], "inputs must be"),
}


@pytest.mark.parametrize("name", list(BAD_ARGUMENTS))
def test_bad_arguments(emu, name):
    s, fdev, dev, ctx = emu
    inputs, plan, text = BAD_ARGUMENTS[name]
    with pytest.raises(ValidationError, match=text):
        s.execute_elementwise_fusion(inputs(s), plan())


def test_invalid_after_a_hot_run_still_raises(emu):
    s, fdev, dev, ctx = emu
    plan = PLANS["exp_mul_add"]
    x = _f32(s, (8,))
    s.execute_elementwise_fusion([x, x], plan)  # the hot path is armed
    with pytest.raises(ValidationError, match="dtype mismatch"):
        s.execute_elementwise_fusion([x, _i32(s, (8,))], plan)
    with pytest.raises(ValidationError, match="shape mismatch"):
        s.execute_elementwise_fusion([x, _f32(s, (9,))], plan)
    with pytest.raises(ValidationError, match="takes 2 input"):
        s.execute_elementwise_fusion([x], plan)


def test_new_shapes_and_equal_plans_do_not_recompile(emu):
    s, fdev, dev, ctx = emu
    for shape in [(3,), (17, 5), (2, 3, 4, 5), (1000,)]:
        plan = P(2, [Ins("mul", (0, 1)), Ins("add", (2, 0))], (3,))  # a fresh equal object
        a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
        got, = s.execute_elementwise_fusion([put(s, a), put(s, a)], plan)
        assert np.array_equal(get(s, got), a * a + a)
    assert len(ctx.sources) == 1
    for shape in [(6, 7), (20, 3)]:  # transposed: one strided kernel for every shape
        a = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
        got, = s.execute_elementwise_fusion([put(s, a).T, put(s, a.T.copy())], plan)
        assert np.array_equal(get(s, got), a.T * a.T + a.T)
    assert len(ctx.sources) == 2
