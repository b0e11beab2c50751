"""Integer dot_general (ptx/dot_int.cu): exact results with wrapping arithmetic in the
operand dtype (every signed and unsigned integer dtype, the largest values included), any
strides without staging (transposed, reversed, broadcast, sliced), tile edges, and grids
beyond the 65535 limit of the y and z dimensions."""

from __future__ import annotations

import numpy as np
import pytest
from dot_reference import accum_ref, device_view, element_index, sample
from gpu_util import down

import tenferro_cuda as tc
from tenferro_cuda.configs.dot import DotGeneralAccumulation as Acc
from tenferro_cuda.configs.dot import DotGeneralConfig as C

INTS = [d for d in tc.ALL_DTYPES if d.is_integer]
MM = C((1,), (0,))
BMM = C((2,), (1,), (0,), (0,))


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.value)
def test_wrapping_is_exact(s, dtype):
    info = np.iinfo(dtype.numpy)
    x = np.full((3, 100), info.max, dtype.numpy)
    y = np.full((100, 2), info.max, dtype.numpy)
    got = down(s, s.dot_general(s.upload_host_tensor(x), s.upload_host_tensor(y), MM))
    want = (x.astype(np.int64) @ y.astype(np.int64)).astype(dtype.numpy)
    assert got.dtype == dtype.numpy and np.array_equal(got, want)


LAYOUTS = [
    ("tiles", (3, 130, 70), "c", (3, 70, 129), "c", BMM, "c"),
    ("transposed", (3, 130, 70), "p021", (3, 70, 129), "p021", BMM, "p021"),
    ("reversed", (130, 70), "n1", (70, 65), "n0", MM, "n1"),
    ("broadcast", (4, 65, 33), "b0", (4, 33, 17), "c", BMM, "S"),
    ("staged_contracting", (6, 10, 7), "c", (6, 7, 9), "c", C((0, 2), (0, 1)), "sT"),
]


@pytest.mark.parametrize("case", LAYOUTS, ids=[c[0] for c in LAYOUTS])
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: d.value)
def test_layouts_exact(s, rng, dtype, case):
    _, ls, ll, rs, rl, cfg, ol = case
    lhs, lv = device_view(s, sample(dtype, ls, rng), ll)
    rhs, rv = device_view(s, sample(dtype, rs, rng), rl)
    o = sample(dtype, accum_ref(lv, rv, cfg, 1, 0, None).shape, rng)
    out, _ = device_view(s, o, ol, fill=5)
    before = down(s, out.base)
    alpha, beta = (7, 250) if dtype.is_unsigned_integer else (-7, 3)
    s.dot_general_read_into_accum(lhs, rhs, cfg, Acc(alpha, beta), out)
    assert np.array_equal(down(s, out), accum_ref(lv, rv, cfg, alpha, beta, o))
    after = down(s, out.base).reshape(-1)
    outside = np.ones(after.size, bool)
    outside[element_index(out).reshape(-1)] = False
    assert np.array_equal(after[outside], before.reshape(-1)[outside])


@pytest.mark.parametrize("dtype", [tc.uint32, tc.uint64], ids=lambda d: d.value)
def test_unsigned_top_bit_and_largest_scalars(s, dtype):
    """Values with the top bit set are large positive numbers, not negative ones, and alpha
    / beta take the whole unsigned range."""
    info = np.iinfo(dtype.numpy)
    top = int(info.max) // 2 + 1
    x = np.array([[top, 3], [info.max, 1]], dtype.numpy)
    y = np.array([[1, 2], [2, info.max]], dtype.numpy)
    o = np.array([[1, 2], [3, 4]], dtype.numpy)
    out = s.upload_host_tensor(o)
    s.dot_general_read_into_accum(s.upload_host_tensor(x), s.upload_host_tensor(y), MM,
                                  Acc(int(info.max), int(top)), out)
    mod = 1 << (8 * dtype.itemsize)
    xs, ys, os_ = ([[int(v) for v in row] for row in a] for a in (x, y, o))
    want = [[(int(info.max) * sum(xs[i][k] * ys[k][j] for k in range(2)) + top * os_[i][j])
             % mod for j in range(2)] for i in range(2)]
    assert np.array_equal(down(s, out), np.array(want, dtype.numpy))


def test_batch_beyond_grid_z(s, rng):
    x = sample(tc.int32, (70000, 1, 3), rng)
    y = sample(tc.int32, (70000, 3, 2), rng)
    got = down(s, s.dot_general(s.upload_host_tensor(x), s.upload_host_tensor(y), BMM))
    assert np.array_equal(got, (x.astype(np.int64) @ y).astype(np.int32))


def test_rows_beyond_grid_y(s, rng):
    m = 64 * 65536 + 5
    x = sample(tc.int8, (m, 2), rng)
    y = sample(tc.int8, (2, 1), rng)
    got = down(s, s.dot_general(s.upload_host_tensor(x), s.upload_host_tensor(y), MM))
    assert np.array_equal(got, (x.astype(np.int64) @ y).astype(np.int8))


def test_beta_zero_ignores_out_and_alpha_zero(s, rng):
    x, y = sample(tc.int64, (5, 4), rng), sample(tc.int64, (4, 3), rng)
    o = sample(tc.int64, (5, 3), rng)
    out = s.upload_host_tensor(o)
    s.dot_general_read_into_accum(s.upload_host_tensor(x), s.upload_host_tensor(y), MM,
                                  Acc(0, 1), out)
    assert np.array_equal(down(s, out), o)
    s.dot_general_read_into_accum(s.upload_host_tensor(x), s.upload_host_tensor(y), MM,
                                  Acc(1, 0), out)
    assert np.array_equal(down(s, out), x @ y)
