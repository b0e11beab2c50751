"""Shape inference and validation of slice, dynamic_slice, dynamic_update_slice, pad,
concatenate and reverse: every rule's error class and kind, and result shapes."""

from __future__ import annotations

import numpy as np
import pytest

from tenferro_cuda import DType, UnsupportedDTypeError, ValidationError
from tenferro_cuda.configs.indexing import PadConfig, SliceConfig
from tenferro_cuda.shapes.indexing import (
    concatenate_shape,
    dynamic_slice_shape,
    dynamic_update_slice_check,
    pad_shape,
    pad_value_bytes,
    reverse_axes,
    slice_shape,
)

F32, I32, I64 = DType.FLOAT32, DType.INT32, DType.INT64

SLICE_OK = [
    ("rank0", (), SliceConfig((), ()), ()),
    ("full", (4, 5), SliceConfig((0, 0), (4, 5)), (4, 5)),
    ("strided", (10,), SliceConfig((1,), (10,), (3,)), (3,)),
    ("empty", (4, 5), SliceConfig((2, 0), (2, 5)), (0, 5)),
    ("stride-past-end", (7,), SliceConfig((6,), (7,), (5,)), (1,)),
]


@pytest.mark.parametrize("shape,cfg,result", [c[1:] for c in SLICE_OK],
                         ids=[c[0] for c in SLICE_OK])
def test_slice_shape(shape, cfg, result):
    assert slice_shape(shape, cfg) == result
    want = np.zeros(shape)[tuple(slice(s, e, k) for s, e, k in
                                 zip(cfg.starts, cfg.limits, cfg.strides))].shape
    assert result == want


@pytest.mark.parametrize("shape,cfg,kind", [
    ((4, 5), SliceConfig((0,), (4,)), "rank_mismatch"),
    ((4, 5), SliceConfig((0, 0), (5, 5)), "axis_out_of_bounds"),
    ((4,) * 9, SliceConfig((0,) * 9, (4,) * 9), "rank_mismatch"),
], ids=["rank", "limit", "rank-9"])
def test_slice_rejects(shape, cfg, kind):
    with pytest.raises(ValidationError) as info:
        slice_shape(shape, cfg)
    assert info.value.kind == kind and info.value.op == "slice"


def test_slice_rejects_non_config():
    with pytest.raises(ValidationError, match="SliceConfig"):
        slice_shape((3,), ((0,), (3,)))


PAD_OK = [
    ("none", (3, 4), PadConfig((0, 0), (0, 0)), (3, 4)),
    ("edges", (3, 4), PadConfig((1, 2), (3, 0)), (7, 6)),
    ("interior", (3, 4), PadConfig((0, 0), (0, 0), (1, 2)), (5, 10)),
    ("crop", (3, 4), PadConfig((-1, 0), (0, -4)), (2, 0)),
    ("empty-axis-interior", (0, 4), PadConfig((1, 0), (1, 0), (5, 0)), (2, 4)),
    ("rank0", (), PadConfig((), ()), ()),
]


@pytest.mark.parametrize("shape,cfg,result", [c[1:] for c in PAD_OK],
                         ids=[c[0] for c in PAD_OK])
def test_pad_shape(shape, cfg, result):
    assert pad_shape(shape, cfg) == result


@pytest.mark.parametrize("shape,cfg,kind", [
    ((3,), PadConfig((0, 0), (0, 0)), "rank_mismatch"),
    ((3,), PadConfig((-2,), (-2,)), "invalid_argument"),
], ids=["rank", "negative-extent"])
def test_pad_rejects(shape, cfg, kind):
    with pytest.raises(ValidationError) as info:
        pad_shape(shape, cfg)
    assert info.value.kind == kind and info.value.op == "pad"


@pytest.mark.parametrize("value,dtype,ok", [
    (0, DType.BOOL, True), (True, DType.BOOL, True), (2, DType.BOOL, False),
    (0.5, DType.BOOL, False), (-128, DType.INT8, True), (128, DType.INT8, False),
    (255, DType.UINT8, True), (-1, DType.UINT8, False), (1.5, DType.INT32, False),
    (2**63 - 1, DType.INT64, True), (2**63, DType.INT64, False), (1e5, DType.FLOAT16, False),
    (-2.5, DType.BFLOAT16, True), (float("nan"), F32, True), (1 + 2j, F32, False),
    (1 + 2j, DType.COMPLEX64, True), (3, DType.COMPLEX128, True), ("x", F32, False),
], ids=lambda v: repr(v))
def test_pad_value(value, dtype, ok):
    if ok:
        raw = pad_value_bytes(value, dtype)
        assert len(raw) == dtype.itemsize
        back = np.frombuffer(raw, dtype.numpy)[0]
        if value == value:
            assert back == np.asarray(value).astype(dtype.numpy)
    else:
        with pytest.raises(ValidationError):
            pad_value_bytes(value, dtype)


@pytest.mark.parametrize("shape,axes,result", [
    ((3, 4), (1,), (1,)), ((3, 4), (), ()), ((3, 4), (0, 1), (0, 1)), ((), (), ()),
], ids=["one", "none", "both", "rank0"])
def test_reverse_axes(shape, axes, result):
    assert reverse_axes(shape, axes) == result


@pytest.mark.parametrize("shape,axes,kind", [
    ((3, 4), (2,), "axis_out_of_bounds"), ((3, 4), (-1,), "axis_out_of_bounds"),
    ((3, 4), (1, 1), "duplicate_axis"), ((3, 4), ("a",), "invalid_argument"),
], ids=["range", "negative", "duplicate", "not-int"])
def test_reverse_rejects(shape, axes, kind):
    with pytest.raises(ValidationError) as info:
        reverse_axes(shape, axes)
    assert info.value.kind == kind


def test_concatenate_shape():
    assert concatenate_shape([(2, 3), (4, 3), (0, 3)], [F32] * 3, 0) == (6, 3)
    assert concatenate_shape([(2, 3), (2, 1)], [F32] * 2, 1) == (2, 4)
    assert concatenate_shape([(5,)], [F32], 0) == (5,)


@pytest.mark.parametrize("shapes,dtypes,axis,kind", [
    ([], [], 0, "invalid_argument"),
    ([(2, 3), (2, 3)], [F32, DType.FLOAT64], 0, "dtype_mismatch"),
    ([(2, 3), (2,)], [F32, F32], 0, "rank_mismatch"),
    ([(2, 3), (2, 4)], [F32, F32], 0, "shape_mismatch"),
    ([(2, 3), (2, 3)], [F32, F32], 2, "axis_out_of_bounds"),
    ([(2, 3), (2, 3)], [F32, F32], 1.0, "invalid_argument"),
    ([(), ()], [F32, F32], 0, "axis_out_of_bounds"),
], ids=["empty", "dtype", "rank", "shape", "axis", "axis-float", "rank0"])
def test_concatenate_rejects(shapes, dtypes, axis, kind):
    with pytest.raises(ValidationError) as info:
        concatenate_shape(shapes, dtypes, axis)
    assert info.value.kind == kind


def test_dynamic_slice_shape():
    assert dynamic_slice_shape((4, 5), (2,), I32, (2, 5)) == (2, 5)
    assert dynamic_slice_shape((), (0,), I64, ()) == ()
    assert dynamic_slice_shape((4,), (1,), I64, [0]) == (0,)


@pytest.mark.parametrize("shape,sshape,sdt,sizes,exc,kind", [
    ((4, 5), (2,), F32, (2, 2), UnsupportedDTypeError, None),
    ((4, 5), (2,), DType.UINT8, (2, 2), UnsupportedDTypeError, None),
    ((4, 5), (3,), I32, (2, 2), ValidationError, "shape_mismatch"),
    ((4, 5), (2, 1), I32, (2, 2), ValidationError, "shape_mismatch"),
    ((4, 5), (), I32, (2, 2), ValidationError, "shape_mismatch"),
    ((4, 5), (2,), I32, (2,), ValidationError, "rank_mismatch"),
    ((4, 5), (2,), I32, (5, 2), ValidationError, "axis_out_of_bounds"),
    ((4, 5), (2,), I32, (-1, 2), ValidationError, "invalid_argument"),
    ((4, 5), (2,), I32, (1.0, 2), ValidationError, "invalid_argument"),
], ids=["starts-float", "starts-uint8", "starts-length", "starts-rank2", "starts-rank0",
        "sizes-length", "size-too-big", "size-negative", "size-float"])
def test_dynamic_slice_rejects(shape, sshape, sdt, sizes, exc, kind):
    with pytest.raises(exc) as info:
        dynamic_slice_shape(shape, sshape, sdt, sizes)
    assert info.value.op == "dynamic_slice"
    if kind:
        assert info.value.kind == kind


@pytest.mark.parametrize("ushape,udt,sshape,sdt,exc,kind", [
    ((2, 2), DType.FLOAT64, (2,), I32, ValidationError, "dtype_mismatch"),
    ((2,), F32, (2,), I32, ValidationError, "rank_mismatch"),
    ((5, 2), F32, (2,), I32, ValidationError, "shape_mismatch"),
    ((2, 2), F32, (1,), I32, ValidationError, "shape_mismatch"),
    ((2, 2), F32, (2,), DType.FLOAT16, UnsupportedDTypeError, None),
], ids=["dtype", "rank", "too-big", "starts-length", "starts-dtype"])
def test_dynamic_update_slice_rejects(ushape, udt, sshape, sdt, exc, kind):
    with pytest.raises(exc) as info:
        dynamic_update_slice_check((4, 5), F32, ushape, udt, sshape, sdt)
    assert info.value.op == "dynamic_update_slice"
    if kind:
        assert info.value.kind == kind


def test_dynamic_update_slice_accepts():
    dynamic_update_slice_check((4, 5), F32, (4, 0), F32, (2,), I64)
    dynamic_update_slice_check((), F32, (), F32, (0,), I32)
