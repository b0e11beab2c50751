"""Shape inference, validation and view algebra of the structural ops (no device).

The view helpers are checked against numpy: a strided view built from their strides must
address exactly the elements numpy's own op selects.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tenferro_cuda.errors import ValidationError
from tenferro_cuda.shapes import structural as ss
from tenferro_cuda.tensor import compact_strides


def view_of(a: np.ndarray, shape, strides, offset=0) -> np.ndarray:
    """Elements of the C-contiguous ``a`` addressed by an element-strided layout."""
    flat = a.reshape(-1)
    idx = np.full(shape, offset, dtype=np.int64)
    for axis, (n, st) in enumerate(zip(shape, strides)):
        sh = [1] * len(shape)
        sh[axis] = n
        idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(sh)
    return flat[idx]


# --- valid cases --------------------------------------------------------------------------
TRANSPOSE = [((), ()), ((4,), (0,)), ((2, 3), (1, 0)), ((2, 3, 4), (2, 0, 1)),
             ((3, 0, 2), (1, 2, 0)), ((1, 2, 1, 3, 1, 2, 1, 2), (7, 6, 5, 4, 3, 2, 1, 0))]


@pytest.mark.parametrize("shape,perm", TRANSPOSE, ids=str)
def test_transpose_shape_and_view(shape, perm):
    p, out = ss.transpose(shape, perm, "transpose")
    a = np.arange(math.prod(shape)).reshape(shape)
    assert out == a.transpose(perm).shape and p == tuple(perm)
    sh, st = ss.permuted(shape, compact_strides(shape), p)
    assert np.array_equal(view_of(a, sh, st), a.transpose(perm))


RESHAPE = [((2, 3), (6,)), ((2, 3), (3, 2)), ((), (1, 1)), ((0, 3), (3, 0)), ((4,), (2, 2))]


@pytest.mark.parametrize("shape,new", RESHAPE, ids=str)
def test_reshape_shape(shape, new):
    assert ss.reshape(shape, new, "reshape") == new


SHARES = [((2, 3), (3, 1), 0, 6, True), ((2, 3), (3, 1), 1, 7, False),
          ((2, 3), (1, 2), 0, 6, False), ((2, 1, 3), (3, 99, 1), 0, 6, True),
          ((2, 3), (3, 1), 0, 12, False), ((0,), (1,), 0, 0, True)]


@pytest.mark.parametrize("shape,strides,offset,base,expect", SHARES, ids=str)
def test_shares_storage(shape, strides, offset, base, expect):
    assert ss.shares_storage(shape, strides, offset, base) is expect


BROADCAST = [((), (2, 3), ()), ((3,), (2, 3), (1,)), ((1,), (4,), (0,)),
             ((3, 1), (3, 5), (0, 1)), ((2, 3), (3, 4, 2), (2, 0)), ((1, 3), (3, 2, 2), (1, 0)),
             ((2,), (2, 0), (0,))]


def broadcast_ref(a: np.ndarray, out, dims) -> np.ndarray:
    """out[idx] = a[idx[dims[0]], idx[dims[1]], ...] (index 0 on extent-1 operand axes)."""
    idx = np.indices(out, dtype=np.int64)
    zero = np.zeros(out, dtype=np.int64)
    return np.broadcast_to(a[tuple(idx[d] if n != 1 else zero
                                   for n, d in zip(a.shape, dims))], out)


@pytest.mark.parametrize("shape,out,dims", BROADCAST, ids=str)
def test_broadcast_in_dim(shape, out, dims):
    got, d = ss.broadcast_in_dim(shape, out, dims, "broadcast_in_dim")
    assert got == out and d == dims
    a = np.arange(1, math.prod(shape) + 1).reshape(shape)
    st = ss.broadcast_strides(shape, compact_strides(shape), out, dims)
    if math.prod(out):
        assert np.array_equal(view_of(a, out, st), broadcast_ref(a, out, dims))


DIAG = [((3, 3), 0, 1), ((3, 4), 1, 0), ((4, 2, 5), 0, 2), ((4, 2, 5), 2, 0),
        ((2, 3, 3, 2), 1, 2), ((2, 3, 3, 2), 3, 0), ((0, 3), 0, 1)]


@pytest.mark.parametrize("shape,a,b", DIAG, ids=str)
def test_extract_diagonal(shape, a, b):
    out, pos = ss.extract_diagonal(shape, a, b, "extract_diagonal")
    x = np.arange(math.prod(shape)).reshape(shape)
    ref = np.moveaxis(np.diagonal(x, axis1=a, axis2=b), -1, pos)
    assert out == ref.shape
    sh, st = ss.diagonal_view(shape, compact_strides(shape), a, b)
    assert sh == out
    if math.prod(out):
        assert np.array_equal(view_of(x, sh, st), ref)


EMBED = [((3,), 0, 0), ((3,), 0, 1), ((2, 4), 1, 0), ((2, 4), 0, 2), ((2, 4), 1, 1),
         ((2, 3, 4), 2, 1), ((0, 2), 1, 2)]


@pytest.mark.parametrize("shape,a,b", EMBED, ids=str)
def test_embed_diagonal_inverts_extract(shape, a, b):
    out, a2 = ss.embed_diagonal(shape, a, b, "embed_diagonal")
    expect = list(shape)
    expect.insert(b, shape[a])
    assert out == tuple(expect) and a2 == (a if a < b else a + 1)
    x = np.arange(1, math.prod(shape) + 1).reshape(shape)
    dense = np.zeros(out, dtype=x.dtype).reshape(-1)
    st = ss.embed_view_strides(compact_strides(out), a, b)
    if x.size:
        idx = view_of(np.arange(math.prod(out)).reshape(out), shape, st)
        dense[idx.reshape(-1)] = x.reshape(-1)
    dense = dense.reshape(out)
    back, pos = ss.extract_diagonal(out, a2, b, "extract_diagonal")
    sh, dst = ss.diagonal_view(out, compact_strides(out), a2, b)
    assert back == shape and sh == shape
    if x.size:
        assert np.array_equal(view_of(dense, sh, dst), x)
        i = np.indices(out)
        assert not dense[i[a2] != i[b]].any()


@pytest.mark.parametrize("shape,strides,expect", [
    ((3, 4), (4, 1), False), ((3, 4), (1, 3), False), ((3, 4), (0, 1), True),
    ((3, 4), (2, 1), True), ((3, 4), (-4, -1), False), ((0, 5), (0, 0), False),
    ((1, 5), (0, 1), False), ((2, 3), (3, 2), True)], ids=str)
def test_self_overlapping(shape, strides, expect):
    assert ss.self_overlapping(shape, strides) is expect


# --- errors -------------------------------------------------------------------------------
ERRORS = [
    ("transpose bad perm length", lambda: ss.transpose((2, 3), (0,), "t"), "rank_mismatch"),
    ("transpose duplicate", lambda: ss.transpose((2, 3), (0, 0), "t"), "duplicate_axis"),
    ("transpose out of range", lambda: ss.transpose((2, 3), (0, 2), "t"),
     "axis_out_of_bounds"),
    ("transpose negative", lambda: ss.transpose((2, 3), (-1, 0), "t"), "axis_out_of_bounds"),
    ("transpose not ints", lambda: ss.transpose((2, 3), (0.5, 1), "t"), "invalid_argument"),
    ("reshape count", lambda: ss.reshape((2, 3), (4, 2), "r"), "shape_mismatch"),
    ("reshape negative", lambda: ss.reshape((2, 3), (-1, 6), "r"), "invalid_argument"),
    ("reshape rank 9", lambda: ss.reshape((1,), (1,) * 9, "r"), "rank_mismatch"),
    ("broadcast dims length", lambda: ss.broadcast_in_dim((3,), (3, 3), (0, 1), "b"),
     "rank_mismatch"),
    ("broadcast dims range", lambda: ss.broadcast_in_dim((3,), (3,), (1,), "b"),
     "axis_out_of_bounds"),
    ("broadcast dims duplicate", lambda: ss.broadcast_in_dim((3, 3), (3, 3), (0, 0), "b"),
     "duplicate_axis"),
    ("broadcast extent", lambda: ss.broadcast_in_dim((2,), (3,), (0,), "b"),
     "shape_mismatch"),
    ("broadcast zero to one", lambda: ss.broadcast_in_dim((0,), (1,), (0,), "b"),
     "shape_mismatch"),
    ("broadcast negative shape", lambda: ss.broadcast_in_dim((), (-2,), (), "b"),
     "invalid_argument"),
    ("diag equal axes", lambda: ss.extract_diagonal((3, 3), 1, 1, "d"), "duplicate_axis"),
    ("diag axis range", lambda: ss.extract_diagonal((3, 3), 0, 2, "d"),
     "axis_out_of_bounds"),
    ("diag rank 1", lambda: ss.extract_diagonal((3,), 0, 1, "d"), "axis_out_of_bounds"),
    ("embed axis_a range", lambda: ss.embed_diagonal((3,), 1, 0, "e"), "axis_out_of_bounds"),
    ("embed axis_b range", lambda: ss.embed_diagonal((3,), 0, 2, "e"), "axis_out_of_bounds"),
    ("embed rank 0", lambda: ss.embed_diagonal((), 0, 0, "e"), "axis_out_of_bounds"),
    ("embed rank 9", lambda: ss.embed_diagonal((1,) * 8, 0, 0, "e"), "rank_mismatch"),
    ("tril rank 1", lambda: ss.triangular((3,), 0, "tril"), "rank_mismatch"),
    ("tril rank 0", lambda: ss.triangular((), 0, "tril"), "rank_mismatch"),
    ("tril k float", lambda: ss.triangular((3, 3), 1.5, "tril"), "invalid_argument"),
]


@pytest.mark.parametrize("name,call,kind", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, call, kind):
    with pytest.raises(ValidationError) as info:
        call()
    assert info.value.kind == kind
    assert info.value.op
