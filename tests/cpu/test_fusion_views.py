"""fusion_views.broadcast_view: the broadcast_in_dim view (stride 0 on broadcast axes, no
copy) against numpy broadcasting, on host tensors and views, and its validation."""

from __future__ import annotations

import numpy as np
import pytest

from tenferro_cuda.errors import ValidationError
from tenferro_cuda.fusion_views import broadcast_view
from tenferro_cuda.tensor import Tensor, TensorView

CASES = {
    # name: (operand shape, output shape, dims, expected strides)
    "row": ((4,), (3, 4), (1,), (0, 1)),
    "column": ((3,), (3, 4), (0,), (1, 0)),
    "scalar": ((), (2, 3), (), (0, 0)),
    "extent 1": ((3, 1), (3, 4), (0, 1), (1, 0)),
    "identity": ((2, 3), (2, 3), (0, 1), (3, 1)),
    "new middle axis": ((2, 3), (2, 5, 3), (0, 2), (3, 0, 1)),
    "all ones": ((1, 1), (1, 1), (0, 1), (1, 1)),
    "empty": ((0,), (2, 0), (1,), (0, 1)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_numpy_broadcasting(name):
    shape, out, dims, strides = CASES[name]
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t = Tensor.from_numpy(a)
    v = broadcast_view(t, out, dims)
    assert isinstance(v, TensorView) and v.base is t and v.shape == out
    assert v.strides == strides
    expanded = [1] * len(out)
    for i, d in enumerate(dims):
        expanded[d] = shape[i]
    assert np.array_equal(v.numpy(), np.broadcast_to(a.reshape(expanded), out))


def test_view_of_a_view_keeps_offset_and_strides():
    a = np.arange(20, dtype=np.int32).reshape(4, 5)
    col = Tensor.from_numpy(a)[1:, 2]  # offset 7, stride 5
    v = broadcast_view(col, (3, 6), (0,))
    assert v.offset == 7 and v.strides == (5, 0)
    assert np.array_equal(v.numpy(), np.broadcast_to(a[1:, 2:3], (3, 6)))


BAD = {
    "dims length": (((4,), (3, 4), (0, 1)), "rank_mismatch"),
    "dims out of range": (((4,), (3, 4), (2,)), "axis_out_of_bounds"),
    "dims repeated": (((2, 2), (2, 2), (1, 1)), "duplicate_axis"),
    "extent mismatch": (((3,), (3, 4), (1,)), "shape_mismatch"),
    "negative extent": (((3,), (-1, 3), (1,)), "invalid_argument"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_invalid_broadcasts_raise(name):
    (shape, out, dims), kind = BAD[name]
    t = Tensor.from_numpy(np.zeros(shape, np.float32))
    with pytest.raises(ValidationError) as info:
        broadcast_view(t, out, dims)
    assert info.value.kind == kind and info.value.op == "broadcast_view"


def test_not_a_tensor():
    with pytest.raises(ValidationError, match="ndarray"):
        broadcast_view(np.zeros(3), (3,), (0,))
