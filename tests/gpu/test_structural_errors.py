"""Every error path of the structural ops: the exception class and kind, raised before
anything is allocated (the pool's allocation count is unchanged) or written (a ``dst``
keeps its contents)."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda.tensor import Tensor

V = tc.ValidationError
HOST = Tensor.from_numpy(np.ones((2, 2), np.float32))

# (id, call(s, x, y) with x a (2, 3, 4) float32 tensor and y a (3, 3) float32, error, kind)
CASES = [
    ("transpose-short-perm", lambda s, x, y: s.transpose(x, (0, 1)), V, "rank_mismatch"),
    ("transpose-duplicate", lambda s, x, y: s.transpose(x, (0, 1, 1)), V, "duplicate_axis"),
    ("transpose-out-of-range", lambda s, x, y: s.transpose(x, (0, 1, 3)), V,
     "axis_out_of_bounds"),
    ("transpose-not-ints", lambda s, x, y: s.transpose(x, "abc"), V, "invalid_argument"),
    ("transpose-host", lambda s, x, y: s.transpose(HOST, (1, 0)), tc.RuntimeStateError, None),
    ("transpose-host-array", lambda s, x, y: s.transpose(np.ones(3), (0,)),
     tc.RuntimeStateError, None),
    ("transpose-not-a-tensor", lambda s, x, y: s.transpose([1.0, 2.0, 3.0], (0,)), V,
     "invalid_argument"),
    ("reshape-count", lambda s, x, y: s.reshape(x, (5, 5)), V, "shape_mismatch"),
    ("reshape-negative", lambda s, x, y: s.reshape(x, (-1, 24)), V, "invalid_argument"),
    ("reshape-view-count", lambda s, x, y: s.reshape_read(x[:, 1:], (24,)), V,
     "shape_mismatch"),
    ("broadcast-dims-length", lambda s, x, y: s.broadcast_in_dim(y, (3, 3), (0,)), V,
     "rank_mismatch"),
    ("broadcast-dims-range", lambda s, x, y: s.broadcast_in_dim(y, (3, 3), (0, 2)), V,
     "axis_out_of_bounds"),
    ("broadcast-dims-duplicate", lambda s, x, y: s.broadcast_in_dim(y, (3, 3, 3), (1, 1)), V,
     "duplicate_axis"),
    ("broadcast-extent", lambda s, x, y: s.broadcast_in_dim(y, (3, 4), (0, 1)), V,
     "shape_mismatch"),
    ("broadcast-rank-9", lambda s, x, y: s.broadcast_in_dim(y, (3, 3) + (1,) * 7, (0, 1)), V,
     "rank_mismatch"),
    ("extract-equal-axes", lambda s, x, y: s.extract_diagonal(x, 1, 1), V, "duplicate_axis"),
    ("extract-axis-range", lambda s, x, y: s.extract_diagonal(x, 0, 3), V,
     "axis_out_of_bounds"),
    ("extract-negative-axis", lambda s, x, y: s.extract_diagonal(x, -1, 0), V,
     "axis_out_of_bounds"),
    ("embed-axis-a-range", lambda s, x, y: s.embed_diagonal(x, 3, 0), V,
     "axis_out_of_bounds"),
    ("embed-axis-b-range", lambda s, x, y: s.embed_diagonal(x, 0, 4), V,
     "axis_out_of_bounds"),
    ("tril-rank-1", lambda s, x, y: s.tril(x[0, 0]), V, "rank_mismatch"),
    ("triu-rank-0", lambda s, x, y: s.triu(x[0, 0, 0]), V, "rank_mismatch"),
    ("tril-k-not-int", lambda s, x, y: s.tril(y, 0.5), V, "invalid_argument"),
    ("contiguous-host", lambda s, x, y: s.to_contiguous_read(HOST), tc.RuntimeStateError,
     None),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_error_before_any_allocation(s, case):
    _, call, error, kind = case
    x = up(s, np.zeros((2, 3, 4), np.float32))
    y = up(s, np.zeros((3, 3), np.float32))
    pool = s.runtime().pool
    before = pool.stats()["allocations"]
    with pytest.raises(error) as info:
        call(s, x, y)
    assert info.value.op
    if kind is not None:
        assert info.value.kind == kind
    assert pool.stats()["allocations"] == before


def _dst_cases():
    return [
        ("shape", lambda s, b: (up(s, np.ones((3, 4), np.float32)), b[:, :3]),
         "shape_mismatch"),
        ("dtype", lambda s, b: (up(s, np.ones((4, 4), np.float64)), b[:4, :4]),
         "dtype_mismatch"),
        ("overlap", lambda s, b: (b[1:5, :4], b[:4, :4]), "invalid_argument"),
        ("overlap-transposed", lambda s, b: (b[:4, :4].T, b[:4, :4]), "invalid_argument"),
        ("self-overlapping-dst", lambda s, b: (up(s, np.ones((4, 4), np.float32)),
                                               b.view((4, 4), (0, 1), 0)), "invalid_argument"),
    ]


@pytest.mark.parametrize("case", _dst_cases(), ids=[c[0] for c in _dst_cases()])
def test_copy_read_into_errors_write_nothing(s, case):
    _, make, kind = case
    host = np.arange(48, dtype=np.float32).reshape(6, 8)
    b = up(s, host)
    src, dst = make(s, b)
    with pytest.raises(V) as info:
        s.copy_read_into(src, dst)
    assert info.value.kind == kind and info.value.op == "copy_read_into"
    assert down(s, b).tobytes() == host.tobytes()


def test_copy_read_into_host_destination(s):
    with pytest.raises(tc.RuntimeStateError):
        s.copy_read_into(up(s, np.ones((2, 2), np.float32)), HOST)


def test_reclaimed_input(s):
    t = up(s, np.ones((2, 2), np.float32))
    s.reclaim_buffer(t)
    with pytest.raises(tc.RuntimeStateError):
        s.transpose(t, (1, 0))
