"""Validation and shape inference of the single-axis reductions
(shapes/reduction_axis.py): the axis rules, the dtype table of every op over every dtype,
the flags, the empty-axis and size limits; each rejected input with its exception class
and ValidationError kind, naming the op."""

from __future__ import annotations

import numpy as np
import pytest

from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError
from tenferro_cuda.shapes import reduction_axis as shp

AXES_OK = {  # (axis, rank) -> normalized
    "zero": (0, 3, 0), "last": (2, 3, 2), "minus_one": (-1, 3, 2), "minus_rank": (-3, 3, 0),
    "numpy_int": (np.int64(1), 2, 1), "numpy_negative": (np.int32(-2), 2, 0),
}


@pytest.mark.parametrize("case", list(AXES_OK))
def test_axes_accepted(case):
    axis, rank, want = AXES_OK[case]
    got = shp.parse_axis(axis, rank, "op")
    assert got == want and type(got) is int


AXES_BAD = {  # (axis, rank) -> ValidationError kind
    "too_big": (3, 3, "axis_out_of_bounds"), "too_negative": (-4, 3, "axis_out_of_bounds"),
    "rank0": (0, 0, "axis_out_of_bounds"), "rank0_negative": (-1, 0, "axis_out_of_bounds"),
    "bool": (True, 3, "invalid_argument"), "numpy_bool": (np.bool_(False), 3, "invalid_argument"),
    "float": (1.0, 3, "invalid_argument"), "none": (None, 3, "invalid_argument"),
    "tuple": ((0,), 3, "invalid_argument"), "str": ("0", 3, "invalid_argument"),
}


@pytest.mark.parametrize("case", list(AXES_BAD))
def test_axes_rejected(case):
    axis, rank, kind = AXES_BAD[case]
    with pytest.raises(ValidationError) as info:
        shp.parse_axis(axis, rank, "argmax")
    assert info.value.kind == kind and info.value.op == "argmax"


def _ordered(d: DType) -> bool:
    return d.is_bool or d.is_integer or d.is_float


def _scan_ok(kind: str, d: DType) -> bool:
    return d.is_numeric and not (kind in ("max", "min") and d.is_complex)


TABLE = ([("arg", None, d) for d in DType] + [("sort", None, d) for d in DType]
         + [("scan", k, d) for k in shp.SCAN_KINDS for d in DType])


def _call(fam: str, kind, d: DType, shape=(3, 4), axis=1):
    if fam == "arg":
        return shp.infer_arg(d, shape, axis, "op")
    if fam == "sort":
        return shp.infer_sort(d, shape, axis, False, "op")
    return shp.infer_scan(kind, d, shape, axis, False, "op")


@pytest.mark.parametrize("fam,kind,dtype", TABLE,
                         ids=[f"{f}-{k or ''}-{d.value}" for f, k, d in TABLE])
def test_dtype_table(fam, kind, dtype):
    ok = _ordered(dtype) if fam in ("arg", "sort") else _scan_ok(kind, dtype)
    if ok:
        _call(fam, kind, dtype)
        return
    with pytest.raises(UnsupportedDTypeError) as info:
        _call(fam, kind, dtype)
    assert info.value.op == "op"


SHAPES = {  # (shape, axis) -> argmax result shape, normalized axis
    "vector": ((7,), 0, (), 0), "rows": ((3, 5), 1, (3,), 1), "cols": ((3, 5), 0, (5,), 0),
    "negative": ((2, 3, 4), -1, (2, 3), 2), "middle": ((2, 3, 4), 1, (2, 4), 1),
    "extent1": ((4, 1), 1, (4,), 1), "empty_kept": ((0, 4), 1, (0,), 1),
    "rank8": ((1,) * 7 + (3,), 7, (1,) * 7, 7),
}


@pytest.mark.parametrize("case", list(SHAPES))
def test_arg_result_shapes(case):
    shape, axis, out, ax = SHAPES[case]
    assert shp.infer_arg(DType.FLOAT32, shape, axis, "op") == (ax, out)
    assert shp.infer_scan("sum", DType.INT8, shape, axis, True, "op") == (ax, True)
    assert shp.infer_sort(DType.BOOL, shape, axis, True, "op") == (ax, True)


ERRORS = {  # call -> (exception, kind)
    "arg_empty_axis": (lambda: shp.infer_arg(DType.FLOAT32, (3, 0), 1, "op"),
                       ValidationError, "invalid_argument"),
    "arg_empty_all": (lambda: shp.infer_arg(DType.INT8, (0,), 0, "op"), ValidationError,
                      "invalid_argument"),
    "arg_rank9": (lambda: shp.infer_arg(DType.FLOAT32, (1,) * 9, 0, "op"), ValidationError,
                  "rank_mismatch"),
    "scan_rank9": (lambda: shp.infer_scan("sum", DType.FLOAT32, (1,) * 9, 0, False, "op"),
                   ValidationError, "rank_mismatch"),
    "scan_reverse_int": (lambda: shp.infer_scan("sum", DType.FLOAT32, (3,), 0, 1, "op"),
                         ValidationError, "invalid_argument"),
    "scan_reverse_none": (lambda: shp.infer_scan("max", DType.INT8, (3,), 0, None, "op"),
                          ValidationError, "invalid_argument"),
    "sort_descending_str": (lambda: shp.infer_sort(DType.FLOAT32, (3,), 0, "yes", "op"),
                            ValidationError, "invalid_argument"),
    "sort_rank0": (lambda: shp.infer_sort(DType.FLOAT32, (), -1, False, "op"),
                   ValidationError, "axis_out_of_bounds"),
    "sort_axis_too_long": (lambda: shp.infer_sort(DType.UINT8, (2, 1 << 31), 1, False, "op"),
                           ValidationError, "invalid_argument"),
    "sort_complex": (lambda: shp.infer_sort(DType.COMPLEX64, (3,), 0, False, "op"),
                     UnsupportedDTypeError, None),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_rejected(case):
    call, exc, kind = ERRORS[case]
    with pytest.raises(exc) as info:
        call()
    assert type(info.value) is exc and info.value.op == "op"
    if kind:
        assert info.value.kind == kind


def test_empty_axes_are_fine_for_scans_and_sort():
    assert shp.infer_scan("prod", DType.FLOAT32, (3, 0), 1, False, "op") == (1, False)
    assert shp.infer_sort(DType.FLOAT32, (0, 3), 0, False, "op") == (0, False)
    # the longest sortable axis is accepted
    assert shp.infer_sort(DType.UINT8, (shp.SORT_MAX_AXIS,), 0, False, "op") == (0, False)
