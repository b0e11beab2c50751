"""Validation and shape inference of the reductions and BLAS-1 ops (shapes/reduction.py):
result shapes, every rejected input with its exception class and kind, the scalars axpby
accepts, and the self-overlap test for its output (shapes/aliasing.self_overlapping)."""

from __future__ import annotations

import numpy as np
import pytest

from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError
from tenferro_cuda.shapes import reduction as shp
from tenferro_cuda.shapes.aliasing import self_overlapping

KINDS = shp.REDUCE_KINDS

SHAPES = {  # (shape, axes) -> (result shape, elements reduced per output)
    "rank0_none": ((), (), (), 1),
    "vector_all": ((7,), (0,), (), 7),
    "matrix_rows": ((3, 5), (1,), (3,), 5),
    "matrix_cols": ((3, 5), (0,), (5,), 3),
    "none": ((3, 5), (), (3, 5), 1),
    "non_adjacent": ((2, 3, 4, 5), (0, 2), (3, 5), 8),
    "unsorted": ((2, 3, 4, 5), (3, 1), (2, 4), 15),
    "all_rank6": ((2, 1, 3, 1, 2, 2), tuple(range(6)), (), 24),
    "zero_kept": ((0, 4), (1,), (0,), 4),
    "zero_reduced": ((4, 0), (1,), (4,), 0),
    "rank8": ((1,) * 8, (7,), (1,) * 7, 1),
}


@pytest.mark.parametrize("kind", ["sum", "prod"])
@pytest.mark.parametrize("case", list(SHAPES))
def test_result_shapes(case, kind):
    shape, axes, out, count = SHAPES[case]
    ax, got, n = shp.infer_reduce(kind, DType.FLOAT32, shape, axes, "op")
    assert (got, n) == (out, count) and set(ax) == set(axes)


@pytest.mark.parametrize("axes", [[1, 0], (0, 1), range(2), np.array([0, 1]), {0, 1},
                                  (np.int64(0), np.int32(1))],
                         ids=["list", "tuple", "range", "ndarray", "set", "numpy_ints"])
def test_axes_forms(axes):
    assert shp.infer_reduce("max", DType.INT8, (2, 3), axes, "op")[1] == ()


ERRORS = {  # (kind, dtype, shape, axes) -> (exception, ValidationError.kind or None)
    "bool": ("sum", DType.BOOL, (3,), (0,), UnsupportedDTypeError, None),
    "bool_max": ("max", DType.BOOL, (3,), (0,), UnsupportedDTypeError, None),
    "complex_max": ("max", DType.COMPLEX64, (3,), (0,), UnsupportedDTypeError, None),
    "complex_min": ("min", DType.COMPLEX128, (3,), (0,), UnsupportedDTypeError, None),
    "rank9": ("sum", DType.FLOAT32, (1,) * 9, (0,), ValidationError, "rank_mismatch"),
    "axis_too_big": ("sum", DType.FLOAT32, (2, 3), (2,), ValidationError,
                     "axis_out_of_bounds"),
    "negative_axis": ("prod", DType.FLOAT32, (2, 3), (-1,), ValidationError,
                      "axis_out_of_bounds"),
    "duplicate": ("sum", DType.INT32, (2, 3), (1, 1), ValidationError, "duplicate_axis"),
    "int_axes": ("sum", DType.FLOAT32, (2, 3), 1, ValidationError, "invalid_argument"),
    "str_axes": ("sum", DType.FLOAT32, (2, 3), "01", ValidationError, "invalid_argument"),
    "float_axis": ("sum", DType.FLOAT32, (2, 3), (0.0,), ValidationError,
                   "invalid_argument"),
    "bool_axis": ("sum", DType.FLOAT32, (2, 3), (True,), ValidationError,
                  "invalid_argument"),
    "none_axes": ("sum", DType.FLOAT32, (2, 3), None, ValidationError, "invalid_argument"),
    "and_float": ("and", DType.FLOAT32, (3,), (0,), UnsupportedDTypeError, None),
    "or_float16": ("or", DType.FLOAT16, (3,), (0,), UnsupportedDTypeError, None),
    "and_complex": ("and", DType.COMPLEX64, (3,), (0,), UnsupportedDTypeError, None),
    "or_axis_too_big": ("or", DType.BOOL, (2, 3), (2,), ValidationError,
                        "axis_out_of_bounds"),
    "max_empty": ("max", DType.FLOAT32, (3, 0), (1,), ValidationError, "invalid_argument"),
    "min_empty": ("min", DType.INT8, (0, 3), (0,), ValidationError, "invalid_argument"),
    "max_empty_all": ("max", DType.FLOAT64, (0, 0), (0, 1), ValidationError,
                      "invalid_argument"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_rejected(case):
    kind, dtype, shape, axes, exc, vkind = ERRORS[case]
    with pytest.raises(exc) as info:
        shp.infer_reduce(kind, dtype, shape, axes, "reduce_x")
    assert type(info.value) is exc and info.value.op == "reduce_x"
    if vkind:
        assert info.value.kind == vkind


def _accepts(kind: str, d: DType) -> bool:
    if kind in ("and", "or"):
        return d.is_bool or d.is_integer
    return d.is_numeric and not (kind in ("max", "min") and d.is_complex)


TABLE = [(k, d) for k in KINDS for d in DType]


@pytest.mark.parametrize("kind,dtype", TABLE, ids=[f"{k}-{d.value}" for k, d in TABLE])
def test_dtype_table(kind, dtype):
    if _accepts(kind, dtype):
        assert shp.infer_reduce(kind, dtype, (4, 0), (0,), "op")[1] == (0,)
        return
    with pytest.raises(UnsupportedDTypeError) as info:
        shp.infer_reduce(kind, dtype, (4, 3), (0,), "op")
    assert info.value.op == "op"


IDENTITIES = {  # (kind, dtype) -> the result of reducing zero elements
    ("sum", DType.FLOAT32): 0, ("prod", DType.INT8): 1, ("and", DType.BOOL): True,
    ("and", DType.INT8): -1, ("and", DType.UINT8): 255, ("and", DType.INT64): -1,
    ("and", DType.INT32): -1, ("or", DType.BOOL): False, ("or", DType.UINT8): 0,
}


@pytest.mark.parametrize("case", list(IDENTITIES), ids=lambda c: f"{c[0]}-{c[1].value}")
def test_identities(case):
    want = IDENTITIES[case]
    got = shp.identity(*case)
    assert got == want and type(got) is type(want)


def test_sum_and_prod_over_empty_axes_are_fine():
    assert shp.infer_reduce("sum", DType.FLOAT32, (3, 0), (1,), "op") == ((1,), (3,), 0)
    assert shp.infer_reduce("prod", DType.INT8, (0, 0), (0, 1), "op") == ((0, 1), (), 0)


# --- BLAS-1 -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [d for d in DType if d.is_numeric], ids=lambda d: d.value)
def test_blas1_result_dtypes(dtype):
    assert shp.infer_vdot(dtype, (3,), dtype, (3,), "op") is dtype
    assert shp.infer_norm_squared(dtype, (3,), "op") is dtype.real
    assert shp.infer_axpby(dtype, (3,), dtype, (3,), "op") is dtype


BLAS_ERRORS = {
    "vdot_dtype": (lambda: shp.infer_vdot(DType.FLOAT32, (3,), DType.FLOAT64, (3,), "op"),
                   ValidationError, "dtype_mismatch"),
    "vdot_shape": (lambda: shp.infer_vdot(DType.FLOAT32, (3,), DType.FLOAT32, (1, 3), "op"),
                   ValidationError, "shape_mismatch"),
    "vdot_bool": (lambda: shp.infer_vdot(DType.BOOL, (3,), DType.BOOL, (3,), "op"),
                  UnsupportedDTypeError, None),
    "vdot_rank9": (lambda: shp.infer_vdot(DType.INT8, (1,) * 9, DType.INT8, (1,) * 9, "op"),
                   ValidationError, "rank_mismatch"),
    "norm_bool": (lambda: shp.infer_norm_squared(DType.BOOL, (3,), "op"),
                  UnsupportedDTypeError, None),
    "norm_rank9": (lambda: shp.infer_norm_squared(DType.FLOAT32, (1,) * 9, "op"),
                   ValidationError, "rank_mismatch"),
    "axpby_dtype": (lambda: shp.infer_axpby(DType.INT8, (3,), DType.UINT8, (3,), "op"),
                    ValidationError, "dtype_mismatch"),
    "axpby_shape": (lambda: shp.infer_axpby(DType.INT8, (3,), DType.INT8, (4,), "op"),
                    ValidationError, "shape_mismatch"),
    "axpby_bool": (lambda: shp.infer_axpby(DType.BOOL, (3,), DType.BOOL, (3,), "op"),
                   UnsupportedDTypeError, None),
}


@pytest.mark.parametrize("case", list(BLAS_ERRORS))
def test_blas1_rejected(case):
    fn, exc, vkind = BLAS_ERRORS[case]
    with pytest.raises(exc) as info:
        fn()
    assert type(info.value) is exc and info.value.op == "op"
    if vkind:
        assert info.value.kind == vkind


SCALARS_OK = {  # (value, dtype) -> the value numpy holds after conversion
    "int_int8": (-128, DType.INT8, -128),
    "int_uint8": (255, DType.UINT8, 255),
    "np_int_int64": (np.int64(2**62), DType.INT64, 2**62),
    "integral_float_int32": (3.0, DType.INT32, 3),
    "int_float16": (2, DType.FLOAT16, 2.0),
    "float_bfloat16": (0.5, DType.BFLOAT16, 0.5),
    "inf_float32": (float("inf"), DType.FLOAT32, float("inf")),
    "float_complex64": (1.5, DType.COMPLEX64, 1.5),
    "complex_complex128": (1 - 2j, DType.COMPLEX128, 1 - 2j),
    "np_float32_float64": (np.float32(0.25), DType.FLOAT64, 0.25),
    "rounded_float16": (0.1, DType.FLOAT16, np.float16(0.1)),
}


@pytest.mark.parametrize("case", list(SCALARS_OK))
def test_scalars_accepted(case):
    value, dtype, want = SCALARS_OK[case]
    raw = shp.scalar_bytes(value, dtype, "op", "alpha")
    assert np.frombuffer(raw, dtype.numpy)[0] == want
    assert len(raw) == dtype.itemsize


SCALARS_BAD = {
    "complex_for_real": (1j, DType.FLOAT32, "invalid_argument"),
    "complex_zero_imag_for_real": (1 + 0j, DType.FLOAT64, "invalid_argument"),
    "fraction_for_int": (0.5, DType.INT32, "invalid_argument"),
    "complex_for_int": (2j, DType.INT8, "invalid_argument"),
    "int8_overflow": (128, DType.INT8, "overflow"),
    "uint8_negative": (-1, DType.UINT8, "overflow"),
    "float16_overflow": (1e5, DType.FLOAT16, "overflow"),
    "float32_overflow": (1e300, DType.FLOAT32, "overflow"),
    "complex64_overflow": (1e300j, DType.COMPLEX64, "overflow"),
    "bool": (True, DType.FLOAT32, "invalid_argument"),
    "string": ("1", DType.FLOAT32, "invalid_argument"),
    "none": (None, DType.INT64, "invalid_argument"),
}


@pytest.mark.parametrize("case", list(SCALARS_BAD))
def test_scalars_rejected(case):
    value, dtype, kind = SCALARS_BAD[case]
    with pytest.raises(ValidationError) as info:
        shp.scalar_bytes(value, dtype, "axpby", "beta")
    assert info.value.kind == kind and "beta" in str(info.value)


OVERLAP = {  # (shape, strides) -> addresses some element twice
    "compact": ((3, 4), (4, 1), False),
    "transposed": ((4, 3), (1, 4), False),
    "negative": ((3, 4), (-4, -1), False),
    "sliced": ((2, 3), (10, 3), False),
    "broadcast": ((3, 4), (0, 1), True),
    "sliding_window": ((3, 3), (1, 1), True),
    "extent1_zero_stride": ((1, 4), (0, 1), False),
    "empty": ((0, 4), (0, 0), False),
}


@pytest.mark.parametrize("case", list(OVERLAP))
def test_self_overlapping(case):
    shape, strides, want = OVERLAP[case]
    assert self_overlapping(shape, strides) is want
