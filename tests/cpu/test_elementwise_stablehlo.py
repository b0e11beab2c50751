"""The StableHLO elementwise ops added to the first set (floor ceil round_nearest_even
round_nearest_afz is_finite logistic tan atan2 cbrt real imag complex bitwise_and/or/xor/not
shift_left shift_right_logical shift_right_arithmetic popcnt count_leading_zeros), pure
Python and on the emulated device: the numpy reference against the specification's worked
examples, the four forms of every op, result dtypes, the dtype rules and their errors
(raised before anything is allocated or launched), in place, ``ElementwiseReadOp`` and
fusion typing. Values on the device: tests/gpu/test_elementwise_stablehlo.py."""

from __future__ import annotations

import numpy as np
import pytest
from reference.stablehlo_examples import EXAMPLES
from stablehlo_ref import MORE_REF, SHIFTS
from test_elementwise_emu import emulated_session, get, put
from test_elementwise_ref import REF, mismatch

from tenferro_cuda.configs.elementwise import ElementwiseReadOp
from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError
from tenferro_cuda.session import CudaExecSession
from tenferro_cuda.shapes.elementwise import KINDS
from tenferro_cuda.shapes.fusion import type_plan

D = DType
NEW = tuple(MORE_REF)
FORMS = ("", "_read", "_into", "_read_into")
NAMES = sorted(EXAMPLES)


@pytest.fixture
def emu(monkeypatch):
    return emulated_session(monkeypatch)


def _close(got: np.ndarray, want: np.ndarray, exact: bool) -> str | None:
    return mismatch(got, want, None if exact else (1e-12, 1e-300))


def test_every_new_op_has_a_kind_a_reference_and_four_methods():
    for op in NEW:
        assert op in KINDS and op in REF, op
        for form in FORMS:
            fn = getattr(CudaExecSession, op + form)
            assert fn.__doc__ and fn.__doc__.splitlines()[0], op + form
    assert not {"and", "or", "xor", "not", "and_", "or_", "not_"} & set(dir(CudaExecSession))


@pytest.mark.parametrize("name", NAMES)
def test_reference_follows_the_specification(name):
    op, _, inputs, want, exact = EXAMPLES[name]
    got, err = REF[op](*inputs)
    assert not err and _close(np.asarray(got), want, exact) is None


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", NAMES)
def test_examples_through_every_form(emu, name, form):
    s, dev, _ = emu
    op, _, inputs, want, exact = EXAMPLES[name]
    xs = [put(s, a) for a in inputs]
    before = len(dev.launches)
    if form.endswith("into"):
        out = put(s, np.zeros(want.shape, want.dtype))
        assert getattr(s, op + form)(*xs, out) is None
    else:
        out = getattr(s, op + form)(*xs)
    assert out.dtype is DType.of(want.dtype) and out.shape == want.shape
    assert _close(get(s, out), want, exact) is None
    assert len(dev.launches) == before + 1


RESULT = {"is_finite": lambda d: D.BOOL, "real": lambda d: d.real, "imag": lambda d: d.real,
          "complex": lambda d: d.complex}
CASES = [(op, d) for op in NEW for d in ALL_DTYPES]


def _inputs(s, op: str, dtype: DType, shape=(2, 3)):
    return [put(s, np.ones(shape, dtype.numpy)) for _ in range(KINDS[op].arity)]


@pytest.mark.parametrize("op,dtype", CASES, ids=[f"{o}-{d.value}" for o, d in CASES])
def test_dtype_rules(emu, op, dtype):
    s, dev, ctx = emu
    xs = _inputs(s, op, dtype)
    allocs, launches = ctx.allocs, len(dev.launches)
    if not KINDS[op].instantiable(dtype):
        with pytest.raises(UnsupportedDTypeError) as info:
            getattr(s, op)(*xs)
        assert info.value.op == op and dtype.value in str(info.value)
        assert (ctx.allocs, len(dev.launches)) == (allocs, launches)
        return
    out = getattr(s, op)(*xs)
    assert out.dtype is RESULT.get(op, lambda d: d)(dtype) and out.shape == (2, 3)


@pytest.mark.parametrize("op", [o for o in NEW if KINDS[o].arity == 2])
def test_binary_dtype_mismatch(emu, op):
    s, dev, ctx = emu
    d = next(d for d in ALL_DTYPES if KINDS[op].instantiable(d))
    other = next(x for x in ALL_DTYPES if x is not d and KINDS[op].instantiable(x)) \
        if op != "complex" else D.FLOAT64
    a, b = put(s, np.ones(3, d.numpy)), put(s, np.ones(3, other.numpy))
    allocs = ctx.allocs
    with pytest.raises(ValidationError) as info:
        getattr(s, op + "_read")(a, b)
    assert info.value.kind == "dtype_mismatch" and info.value.op == op + "_read"
    assert ctx.allocs == allocs


def test_complex_takes_no_promotion_and_checks_out(emu):
    s, dev, ctx = emu
    re, im = put(s, np.ones(4, np.float32)), put(s, np.ones(4, np.float32))
    with pytest.raises(ValidationError) as info:  # a rank-0 complex part is not promoted
        s.complex(re, put(s, np.array(1 + 1j, np.complex64)))
    assert info.value.kind == "dtype_mismatch"
    with pytest.raises(UnsupportedDTypeError):
        s.complex(put(s, np.ones(4, np.float16)), put(s, np.ones(4, np.float16)))
    bad = put(s, np.zeros(4, np.float32))
    with pytest.raises(ValidationError) as info:
        s.complex_into(re, im, bad)
    assert info.value.kind == "dtype_mismatch" and "complex64" in str(info.value)
    assert np.array_equal(get(s, bad), np.zeros(4, np.float32))
    scalar = s.complex(put(s, np.array(2.0, np.float32)), im)  # rank 0 broadcasts
    assert np.array_equal(get(s, scalar), np.full(4, 2 + 1j, np.complex64))


@pytest.mark.parametrize("op", ["bitwise_not", "floor", "shift_left", "real", "atan2"])
def test_in_place(emu, op):
    s, dev, ctx = emu
    d = {"bitwise_not": D.INT32, "shift_left": D.UINT8}.get(op, D.FLOAT64)
    rng = np.random.default_rng(3)
    arrays = [(rng.random(6) * 9).astype(d.numpy) for _ in range(KINDS[op].arity)]
    want, _ = REF[op](*arrays)
    xs = [put(s, a) for a in arrays]
    getattr(s, op + "_into")(*xs, xs[0])
    assert mismatch(get(s, xs[0]), want, None) is None


@pytest.mark.parametrize("op", ["is_finite", "imag", "complex"])
def test_in_place_needs_the_result_dtype(emu, op):
    s, dev, ctx = emu
    d = D.COMPLEX64 if op == "imag" else D.FLOAT32
    xs = [put(s, np.ones(4, d.numpy)) for _ in range(KINDS[op].arity)]
    launches = len(dev.launches)
    with pytest.raises(ValidationError) as info:
        getattr(s, op + "_into")(*xs, xs[0])
    assert info.value.kind == "dtype_mismatch" and len(dev.launches) == launches


@pytest.mark.parametrize("op", NEW)
def test_elementwise_read_into_names_every_new_op(emu, op):
    s, dev, ctx = emu
    rec = getattr(ElementwiseReadOp, op.upper())
    assert rec.name == op and rec.arity == KINDS[op].arity
    name = next(n for n in EXAMPLES if EXAMPLES[n][0] == op)
    _, _, inputs, want, exact = EXAMPLES[name]
    out = put(s, np.zeros(want.shape, want.dtype))
    s.elementwise_read_into(rec, [put(s, a) for a in inputs], out)
    assert _close(get(s, out), want, exact) is None


def test_views_and_broadcast(emu):
    s, dev, ctx = emu
    a = np.arange(-12, 12, dtype=np.int32).reshape(4, 6)
    x = put(s, a)
    n = put(s, np.array(3, np.int32))
    got = get(s, s.shift_right_arithmetic_read(x.T, n))
    assert np.array_equal(got, a.T >> 3) and dev.launches[-1][0] == "strided"
    got = get(s, s.bitwise_xor_read(x[::-1, ::2], x[:, 1::2]))
    assert np.array_equal(got, a[::-1, ::2] ^ a[:, 1::2])


def test_shift_amounts_are_read_as_unsigned():
    for op in SHIFTS:
        a = np.array([-100, 100], np.int8)
        got, _ = REF[op](a, np.array([-8, -8], np.int8))  # 248 >= 8
        want = {"shift_right_arithmetic": [-1, 0]}.get(op, [0, 0])
        assert np.array_equal(got, np.array(want, np.int8)), op


# --- fusion ---------------------------------------------------------------------------
P, Ins = ElementwiseFusionPlan, FusionInstruction


@pytest.mark.parametrize("op", NEW)
def test_fusion_instruction_types_like_the_op(op):
    kind = KINDS[op]
    for d in ALL_DTYPES:
        plan = P(kind.arity, [Ins(op, tuple(range(kind.arity)))], (kind.arity,))
        if kind.instantiable(d):
            typed = type_plan(plan, (d,) * kind.arity, (False,) * kind.arity, "t")
            assert typed.out_dtypes == (kind.out_dtype(d),)
        else:
            with pytest.raises(UnsupportedDTypeError):
                type_plan(plan, (d,) * kind.arity, (False,) * kind.arity, "t")


def test_fusion_chain_of_new_ops_types():
    plan = P(2, [Ins("atan2", (0, 1)), Ins("floor", (2,)), Ins("complex", (3, 0)),
                 Ins("real", (4,)), Ins("is_finite", (5,)), Ins("bitwise_not", (6,))], (7, 4))
    typed = type_plan(plan, (D.FLOAT32, D.FLOAT32), (False, False), "t")
    assert typed.out_dtypes == (D.BOOL, D.COMPLEX64)
    with pytest.raises(UnsupportedDTypeError) as info:
        type_plan(P(1, [Ins("popcnt", (0,))], (1,)), (D.FLOAT32,), (False,), "t")
    assert "instruction 0 (popcnt(v0)" in str(info.value)
