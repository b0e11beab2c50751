"""Structural ops against numpy: an op-record table x all 15 dtypes, on owned tensors and on
strided views (rank 0-6, 0-size axes, odd sizes). Results must be bit-identical: a
permutation moves bits, and the masks write all-zero bits."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc


def sample(dtype, shape, rng):
    if dtype == tc.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype.numpy)
    if dtype.is_integer:
        info = np.iinfo(dtype.numpy)
        return rng.integers(info.min, info.max, shape, dtype=dtype.numpy, endpoint=True)
    return rng.standard_normal(shape).astype(dtype.numpy)


def broadcast_ref(a, out, dims):
    idx = np.indices(out, dtype=np.int64)
    zero = np.zeros(out, dtype=np.int64)
    pick = tuple(idx[d] if n != 1 else zero for n, d in zip(a.shape, dims))
    return np.broadcast_to(a[pick], out)


def diag_ref(a, ax, b):
    return np.moveaxis(np.diagonal(a, axis1=ax, axis2=b), -1, ax if ax < b else ax - 1)


def embed_ref(a, ax, b):
    shape = list(a.shape)
    shape.insert(b, a.shape[ax])
    a2 = ax if ax < b else ax + 1
    out = np.zeros(shape, a.dtype)
    idx = np.indices(shape, dtype=np.int64)
    mask = idx[a2] == idx[b]
    out[mask] = a[tuple(np.delete(idx, b, axis=0))][mask]
    return out


def ident(t):
    return t


# (id, base shape, view of the base, op on the session, numpy reference on the view)
RECORDS = [
    ("transpose-rank0", (), ident, lambda s, x: s.transpose(x, ()), lambda a: a),
    ("transpose-1d", (7,), ident, lambda s, x: s.transpose(x, (0,)), lambda a: a),
    ("transpose-2d", (5, 3), ident, lambda s, x: s.transpose(x, (1, 0)), lambda a: a.T),
    ("transpose-0size", (3, 0, 2), ident, lambda s, x: s.transpose(x, (2, 0, 1)),
     lambda a: a.transpose(2, 0, 1)),
    ("transpose-rank5", (2, 3, 4, 5, 3), ident, lambda s, x: s.transpose(x, (4, 2, 0, 3, 1)),
     lambda a: a.transpose(4, 2, 0, 3, 1)),
    ("transpose-rank6", (2, 1, 3, 1, 2, 3), ident,
     lambda s, x: s.transpose(x, (5, 4, 3, 2, 1, 0)), lambda a: a.transpose(5, 4, 3, 2, 1, 0)),
    ("transpose-view", (6, 9, 5), lambda t: t[::2, 1:, ::-1],
     lambda s, x: s.transpose_read(x, (2, 0, 1)), lambda a: a.transpose(2, 0, 1)),
    ("reshape", (2, 3, 4), ident, lambda s, x: s.reshape(x, (4, 6)),
     lambda a: a.reshape(4, 6)),
    ("reshape-rank0", (), ident, lambda s, x: s.reshape(x, (1, 1)), lambda a: a.reshape(1, 1)),
    ("reshape-0size", (0, 3), ident, lambda s, x: s.reshape(x, (3, 0)),
     lambda a: a.reshape(3, 0)),
    ("reshape-view", (6, 10), lambda t: t[1:, ::3], lambda s, x: s.reshape_read(x, (4, 5)),
     lambda a: a.reshape(4, 5)),
    ("reshape-transposed-view", (3, 4), lambda t: t.T, lambda s, x: s.reshape(x, (12,)),
     lambda a: a.reshape(12)),
    ("broadcast-row", (3,), ident, lambda s, x: s.broadcast_in_dim(x, (2, 3), (1,)),
     lambda a: broadcast_ref(a, (2, 3), (1,))),
    ("broadcast-scalar", (), ident, lambda s, x: s.broadcast_in_dim(x, (2, 2), ()),
     lambda a: broadcast_ref(a, (2, 2), ())),
    ("broadcast-column", (3, 1), ident, lambda s, x: s.broadcast_in_dim(x, (4, 3, 5), (1, 0)),
     lambda a: broadcast_ref(a, (4, 3, 5), (1, 0))),
    ("broadcast-permuting", (2, 3), ident,
     lambda s, x: s.broadcast_in_dim(x, (3, 7, 2), (2, 0)),
     lambda a: broadcast_ref(a, (3, 7, 2), (2, 0))),
    ("broadcast-view", (4, 6), lambda t: t[::-2, 1::2],
     lambda s, x: s.broadcast_in_dim_read(x, (2, 5, 3), (0, 2)),
     lambda a: broadcast_ref(a, (2, 5, 3), (0, 2))),
    ("broadcast-0size", (0,), ident, lambda s, x: s.broadcast_in_dim(x, (3, 0), (1,)),
     lambda a: broadcast_ref(a, (3, 0), (1,))),
    ("extract-square", (4, 4), ident, lambda s, x: s.extract_diagonal(x, 0, 1),
     lambda a: diag_ref(a, 0, 1)),
    ("extract-rect", (3, 4, 5), ident, lambda s, x: s.extract_diagonal(x, 2, 0),
     lambda a: diag_ref(a, 2, 0)),
    ("extract-view", (5, 6, 7), lambda t: t[:, ::-1, 1:],
     lambda s, x: s.extract_diagonal(x, 1, 2), lambda a: diag_ref(a, 1, 2)),
    ("extract-0size", (0, 3), ident, lambda s, x: s.extract_diagonal(x, 0, 1),
     lambda a: diag_ref(a, 0, 1)),
    ("embed-1d", (5,), ident, lambda s, x: s.embed_diagonal(x, 0, 0),
     lambda a: embed_ref(a, 0, 0)),
    ("embed-front", (2, 3), ident, lambda s, x: s.embed_diagonal(x, 1, 0),
     lambda a: embed_ref(a, 1, 0)),
    ("embed-back", (2, 3), ident, lambda s, x: s.embed_diagonal(x, 0, 2),
     lambda a: embed_ref(a, 0, 2)),
    ("embed-view", (4, 6), lambda t: t[1:, ::2], lambda s, x: s.embed_diagonal(x, 1, 1),
     lambda a: embed_ref(a, 1, 1)),
    ("tril", (4, 5), ident, lambda s, x: s.tril(x), lambda a: np.tril(a)),
    ("tril-batched", (2, 3, 5, 4), ident, lambda s, x: s.tril(x, -1),
     lambda a: np.tril(a, -1)),
    ("tril-view", (6, 7), lambda t: t[::-1, 2:], lambda s, x: s.tril(x, 2),
     lambda a: np.tril(a, 2)),
    ("tril-0size", (0, 4), ident, lambda s, x: s.tril(x), lambda a: np.tril(a)),
    ("triu", (5, 4), ident, lambda s, x: s.triu(x), lambda a: np.triu(a)),
    ("triu-batched", (3, 1, 4, 6), ident, lambda s, x: s.triu(x, 2), lambda a: np.triu(a, 2)),
    ("triu-far", (3, 3), ident, lambda s, x: s.triu(x, -10**12), lambda a: a),
    ("triu-view", (5, 8), lambda t: t.T, lambda s, x: s.triu(x, -1),
     lambda a: np.triu(a, -1)),
    ("contiguous", (3, 4), ident, lambda s, x: s.to_contiguous_read(x), lambda a: a),
    ("contiguous-view", (8, 6, 3), lambda t: t[1::3, ::-1, :2],
     lambda s, x: s.to_contiguous_read(x), lambda a: a),
    ("contiguous-transposed", (9, 11), lambda t: t.T, lambda s, x: s.to_contiguous_read(x),
     lambda a: a),
    ("contiguous-rank0", (), ident, lambda s, x: s.to_contiguous_read(x), lambda a: a),
]


@pytest.mark.parametrize("dtype", tc.ALL_DTYPES, ids=lambda d: d.value)
@pytest.mark.parametrize("rec", RECORDS, ids=[r[0] for r in RECORDS])
def test_op_against_numpy(s, rng, rec, dtype):
    _, shape, view, op, ref = rec
    a = sample(dtype, shape, rng)
    x = view(up(s, a))
    expect = np.asarray(ref(np.asarray(view(a)))).copy(order="C")
    out = op(s, x)
    assert isinstance(out, tc.Tensor)
    assert out.shape == expect.shape and out.dtype is dtype
    got = down(s, out)
    assert got.tobytes() == expect.tobytes()


@pytest.mark.parametrize("dtype", tc.ALL_DTYPES, ids=lambda d: d.value)
def test_copy_read_into_views(s, rng, dtype):
    a = sample(dtype, (5, 4), rng)
    dst_host = sample(dtype, (10, 12), rng)
    d = up(s, dst_host)
    s.copy_read_into(up(s, a).T, d[::2, 1::3].T)
    ref = dst_host.copy()
    ref[::2, 1::3] = a
    assert down(s, d).tobytes() == ref.tobytes()
    # negative strides on both sides, into an owned tensor
    out = up(s, np.zeros((4, 5), dtype.numpy))
    s.copy_read_into(up(s, a)[::-1, ::-1].T, out)
    assert down(s, out).tobytes() == np.ascontiguousarray(a[::-1, ::-1].T).tobytes()


def test_reshape_shares_the_buffer_of_compact_input(s, rng):
    a = sample(tc.float32, (4, 6), rng)
    t = up(s, a)
    r = s.reshape(t, (2, 12))
    assert r.buffer is t.buffer
    full_view = t.view((24,), (1,), 0)
    assert s.reshape(full_view, (6, 4)).buffer is t.buffer
    assert s.reshape(t[1:], (18,)).buffer is not t.buffer
    del t
    assert down(s, r).tobytes() == a.reshape(2, 12).tobytes()


def test_results_are_fresh_tensors(s, rng):
    a = sample(tc.int32, (3, 3), rng)
    t = up(s, a)
    for out in (s.transpose(t, (0, 1)), s.to_contiguous_read(t),
                s.broadcast_in_dim(t, (3, 3), (0, 1))):
        assert out.buffer is not t.buffer
        assert down(s, out).tobytes() == a.tobytes()
