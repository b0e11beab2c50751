"""shapes/elementwise.py and configs/elementwise.py: which dtypes each op accepts, result
dtypes, promotion of a real rank-0 operand, shape rules, out checks, cast/convert targets
and the ElementwiseReadOp / CompareDir records (pure Python)."""

from __future__ import annotations

import pytest

from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.dtypes import ALL_DTYPES, DType, lattice_allows
from tenferro_cuda.errors import (
    UnsupportedDTypeConversionError,
    UnsupportedDTypeError,
    ValidationError,
)
from tenferro_cuda.shapes import elementwise as ew

D = DType
ALL = set(ALL_DTYPES)
NUMERIC = ALL - {D.BOOL}
CPLX = {D.COMPLEX64, D.COMPLEX128}
REAL = NUMERIC - CPLX
FLOATS = {D.FLOAT16, D.BFLOAT16, D.FLOAT32, D.FLOAT64}
INEXACT = FLOATS | CPLX
INTS = {D.INT8, D.UINT8, D.INT16, D.UINT16, D.INT32, D.UINT32, D.INT64, D.UINT64}
# The documented contract (docs/dtypes.md), written out independently of the table.
ACCEPTS = {
    "add": NUMERIC, "sub": NUMERIC, "mul": NUMERIC, "div": NUMERIC, "pow": NUMERIC,
    "rem": REAL, "maximum": REAL | {D.BOOL}, "minimum": REAL | {D.BOOL},
    "neg": NUMERIC, "conj": ALL, "abs": NUMERIC, "sign": NUMERIC,
    "select": ALL, "clamp": REAL | {D.BOOL},
    **{op: INEXACT for op in ("exp", "log", "sin", "cos", "tanh", "sqrt", "rsqrt", "expm1",
                              "log1p")},
    "compare_eq": ALL, "compare_ne": ALL, **{f"compare_{d}": ALL - CPLX
                                             for d in ("lt", "le", "gt", "ge")},
    **{op: FLOATS for op in ("floor", "ceil", "round_nearest_even", "round_nearest_afz",
                             "is_finite")},
    **{op: INEXACT for op in ("real", "imag", "logistic", "tan", "atan2", "cbrt")},
    "complex": {D.FLOAT32, D.FLOAT64},
    **{f"bitwise_{op}": INTS | {D.BOOL} for op in ("and", "or", "xor", "not")},
    **{op: INTS for op in ("shift_left", "shift_right_logical", "shift_right_arithmetic",
                           "popcnt", "count_leading_zeros")},
}
CASES = [(k, d) for k in sorted(ACCEPTS) for d in ALL_DTYPES]


def _call(key: str, dtype: DType, shape=(2, 3)):
    kind = ew.KINDS[key]
    dts = [D.BOOL, dtype, dtype] if kind.name == "select" else [dtype] * kind.arity
    return ew.infer(kind, dts, [shape] * kind.arity, key)


def test_table_covers_every_op():
    assert set(ew.KINDS) == set(ACCEPTS)


@pytest.mark.parametrize("key,dtype", CASES, ids=[f"{k}-{d.value}" for k, d in CASES])
def test_accepted_dtypes(key, dtype):
    if dtype in ACCEPTS[key]:
        res = _call(key, dtype)
        assert res.shape == (2, 3) and res.primary is dtype
        assert ew.KINDS[key].instantiable(dtype)
    else:
        with pytest.raises(UnsupportedDTypeError) as info:
            _call(key, dtype)
        assert info.value.op == key and dtype.value in str(info.value)
        assert not ew.KINDS[key].instantiable(dtype)


@pytest.mark.parametrize("key,dtype,want", [
    ("abs", D.COMPLEX64, D.FLOAT32), ("abs", D.COMPLEX128, D.FLOAT64),
    ("abs", D.INT8, D.INT8), ("abs", D.BFLOAT16, D.BFLOAT16),
    ("compare_lt", D.FLOAT16, D.BOOL), ("compare_eq", D.COMPLEX64, D.BOOL),
    ("select", D.INT64, D.INT64), ("conj", D.COMPLEX64, D.COMPLEX64), ("sign", D.UINT8, D.UINT8),
    ("is_finite", D.BFLOAT16, D.BOOL), ("real", D.COMPLEX128, D.FLOAT64),
    ("imag", D.COMPLEX64, D.FLOAT32), ("real", D.FLOAT16, D.FLOAT16),
    ("imag", D.FLOAT64, D.FLOAT64), ("complex", D.FLOAT32, D.COMPLEX64),
    ("complex", D.FLOAT64, D.COMPLEX128), ("floor", D.FLOAT16, D.FLOAT16),
    ("bitwise_and", D.BOOL, D.BOOL), ("bitwise_not", D.UINT8, D.UINT8),
    ("popcnt", D.INT64, D.INT64), ("count_leading_zeros", D.INT8, D.INT8),
    ("shift_right_arithmetic", D.UINT8, D.UINT8), ("atan2", D.COMPLEX64, D.COMPLEX64),
])
def test_result_dtype(key, dtype, want):
    assert _call(key, dtype).dtype is want


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "pow"])
@pytest.mark.parametrize("scalar_first", [True, False], ids=["scalar-lhs", "scalar-rhs"])
@pytest.mark.parametrize("real,cplx", [(D.FLOAT32, D.COMPLEX64), (D.FLOAT64, D.COMPLEX128)])
def test_real_scalar_promotes_to_complex(op, scalar_first, real, cplx):
    dts, shapes = [real, cplx], [(), (4, 2)]
    if not scalar_first:
        dts, shapes = dts[::-1], shapes[::-1]
    res = ew.infer(ew.KINDS[op], dts, shapes, op)
    assert res.primary is cplx and res.dtype is cplx and res.shape == (4, 2)
    assert res.promote == ((True, False) if scalar_first else (False, True))


@pytest.mark.parametrize("op,dts,shapes", [
    ("add", [D.COMPLEX64, D.FLOAT32], [(), (3,)]),      # complex scalar, real tensor
    ("add", [D.FLOAT32, D.COMPLEX64], [(3,), (3,)]),    # real tensor, not rank 0
    ("mul", [D.FLOAT64, D.COMPLEX64], [(), (3,)]),      # not the counterpart
    ("add", [D.INT32, D.COMPLEX64], [(), (3,)]),
    ("sub", [D.FLOAT16, D.FLOAT32], [(), (3,)]),
    ("rem", [D.FLOAT32, D.COMPLEX64], [(), (3,)]),      # rem takes no promotion
    ("maximum", [D.INT8, D.UINT8], [(3,), (3,)]),
    ("compare_eq", [D.FLOAT32, D.COMPLEX64], [(), (3,)]),
    ("clamp", [D.FLOAT32, D.FLOAT32, D.FLOAT64], [(3,), (), ()]),
], ids=lambda v: str(v) if isinstance(v, str) else None)
def test_dtype_mismatch(op, dts, shapes):
    with pytest.raises(ValidationError) as info:
        ew.infer(ew.KINDS[op], dts, shapes, op)
    assert info.value.kind == "dtype_mismatch" and info.value.op == op


@pytest.mark.parametrize("shapes,want", [
    ([(2, 3), (2, 3)], (2, 3)), ([(), (2, 3)], (2, 3)), ([(2, 3), ()], (2, 3)),
    ([(), ()], ()), ([(0,), ()], (0,)), ([(0, 4), (0, 4)], (0, 4)),
    ([(1,) * 8, (1,) * 8], (1,) * 8),
], ids=str)
def test_shapes_accepted(shapes, want):
    assert ew.infer(ew.KINDS["add"], [D.FLOAT32] * 2, shapes, "add").shape == want


@pytest.mark.parametrize("shapes", [
    [(3,), (1,)], [(2, 3), (3, 2)], [(2, 3), (2, 3, 1)], [(0,), (1,)], [(4,), (5,)],
], ids=str)
def test_shape_mismatch(shapes):
    with pytest.raises(ValidationError) as info:
        ew.infer(ew.KINDS["mul"], [D.INT32] * 2, shapes, "mul")
    assert info.value.kind == "shape_mismatch"


def test_ternary_shapes_and_broadcast():
    k = ew.KINDS["select"]
    assert ew.infer(k, [D.BOOL, D.FLOAT32, D.FLOAT32], [(), (4,), ()], "select").shape == (4,)
    with pytest.raises(ValidationError):
        ew.infer(k, [D.BOOL, D.FLOAT32, D.FLOAT32], [(3,), (4,), ()], "select")


def test_select_predicate_and_branches():
    k = ew.KINDS["select"]
    with pytest.raises(UnsupportedDTypeError):
        ew.infer(k, [D.INT8, D.FLOAT32, D.FLOAT32], [(2,)] * 3, "select")
    with pytest.raises(ValidationError) as info:
        ew.infer(k, [D.BOOL, D.FLOAT32, D.FLOAT64], [(2,)] * 3, "select")
    assert info.value.kind == "dtype_mismatch"


@pytest.mark.parametrize("n", [0, 1, 3])
def test_arity(n):
    with pytest.raises(ValidationError) as info:
        ew.infer(ew.KINDS["add"], [D.FLOAT32] * n, [(2,)] * n, "add")
    assert info.value.kind == "invalid_argument"


def test_check_out_view():
    ew.check_out_view((2, 3), (3, 1), D.FLOAT32, (2, 3), D.FLOAT32, "add_into")
    ew.check_out_view((1, 3), (0, 1), D.FLOAT32, (1, 3), D.FLOAT32, "add_into")
    for args, kind in [(((3, 2), (2, 1), D.FLOAT32), "shape_mismatch"),
                       (((2, 3), (3, 1), D.FLOAT64), "dtype_mismatch"),
                       (((2, 3), (0, 1), D.FLOAT32), "invalid_argument")]:
        with pytest.raises(ValidationError) as info:
            ew.check_out_view(*args, (2, 3), D.FLOAT32, "add_into")
        assert info.value.kind == kind


@pytest.mark.parametrize("target", [D.FLOAT32, "float32", "bfloat16", "complex128", "bool"],
                         ids=str)
def test_cast_target(target):
    assert isinstance(ew.cast_target(target, "cast"), DType)


@pytest.mark.parametrize("target", ["float8", object(), 3.5], ids=["float8", "object", "3.5"])
def test_cast_target_rejects(target):
    with pytest.raises(UnsupportedDTypeError) as info:
        ew.cast_target(target, "cast")
    assert info.value.op == "cast"


PAIRS = [(a, b) for a in ALL_DTYPES for b in ALL_DTYPES]


@pytest.mark.parametrize("src,dst", PAIRS, ids=[f"{a.value}-{b.value}" for a, b in PAIRS])
def test_convert_follows_lattice(src, dst):
    if lattice_allows(src, dst):
        ew.check_convert(src, dst)
    else:
        with pytest.raises(UnsupportedDTypeConversionError) as info:
            ew.check_convert(src, dst)
        assert f"{src.value} -> {dst.value}" in str(info.value)


def test_cast_kinds_cover_every_target():
    assert {k.to for k in ew.CAST_KINDS.values()} == ALL
    assert all(k.accepts == frozenset(ALL) for k in ew.CAST_KINDS.values())


@pytest.mark.parametrize("key,dtype,reason", [
    ("div", D.INT8, "integer division by zero"), ("rem", D.UINT8, "integer division by zero"),
    ("pow", D.INT64, "negative integer exponent"), ("pow", D.UINT8, None),
    ("div", D.FLOAT32, None), ("add", D.INT32, None), ("rem", D.FLOAT64, None),
])
def test_error_reasons(key, dtype, reason):
    assert ew.KINDS[key].error_reason(dtype) == reason


# --- the records ------------------------------------------------------------------------
def test_read_op_constants():
    for name, arity in [("ADD", 2), ("EXP", 1), ("SELECT", 3), ("CLAMP", 3), ("NEG", 1)]:
        rec = getattr(ElementwiseReadOp, name)
        assert rec.name == name.lower() and rec.arity == arity and rec.direction is None
        assert ew.kind_of(rec, "x") is ew.KINDS[name.lower()]
    assert not hasattr(ElementwiseReadOp, "COMPARE")


@pytest.mark.parametrize("d", list(CompareDir), ids=lambda d: d.name)
def test_read_op_compare(d):
    rec = ElementwiseReadOp.compare(d)
    assert rec == ElementwiseReadOp("compare", d) and hash(rec) == hash(ElementwiseReadOp(
        "compare", d))
    assert ew.kind_of(rec, "x").direction is d and rec.arity == 2
    assert ew.compare_kind(d.name) is ew.compare_kind(d) is ew.compare_kind(d.name.lower())
    assert repr(rec) == f"ElementwiseReadOp.compare(CompareDir.{d.name})"


@pytest.mark.parametrize("args", [("nope",), ("compare",), ("compare", "LT"),
                                  ("add", CompareDir.LT)], ids=str)
def test_read_op_invalid(args):
    with pytest.raises(ValidationError):
        ElementwiseReadOp(*args)


def test_read_op_frozen_and_kind_of_rejects_others():
    with pytest.raises(AttributeError):
        ElementwiseReadOp.ADD.name = "sub"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        ew.kind_of("add", "elementwise_read_into")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ew.compare_kind("sideways")


def test_compare_codes_match_ops_cuh():
    assert [d.kernel_code for d in CompareDir] == [0, 1, 2, 3, 4, 5]
    from tenferro_cuda.kernels.registry import INCLUDE_DIR
    text = (INCLUDE_DIR / "tenferro" / "ops.cuh").read_text()
    assert "CMP_EQ = 0, CMP_NE = 1, CMP_LT = 2, CMP_LE = 3, CMP_GT = 4, CMP_GE = 5" in text
