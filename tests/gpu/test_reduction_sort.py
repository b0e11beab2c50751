"""sort / sort_with_indices on the GPU against numpy's stable sort (NaNs last in both
directions; the same bits: -0.0 and +0.0 in input order, NaN payloads kept) and, where
installed, ``jax.lax.sort`` and ``torch.sort(stable=True)``: every ordered dtype x shape
class (rank 1-4, rows up to the in-block limit and just past it, radix rows of one and of
many blocks, other axes than the last, transposed / negative-stride / sliced views,
extent-1 and empty axes), both directions, ties, NaN, +-inf, +-0, INT_MIN/INT_MAX; int64
indices; the same bits every run; 2^24 elements."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32", "float64"]
LOWP = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def npdtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def ident(x):
    return x


CASES = {  # name -> (shape, view, axis)
    "rank1_one": ((1,), ident, 0),
    "rank1_short": ((37,), ident, 0),
    "rows": ((100, 300), ident, 1),
    "rows_at_limit": ((20, 2048), ident, -1),
    "rows_past_limit": ((5, 2049), ident, 1),
    "many_short_rows": ((20000, 5), ident, 1),
    "radix_row": ((300001,), ident, 0),
    "radix_rows": ((4, 70000), ident, 1),
    "axis0_small": ((300, 40), ident, 0),
    "axis0_radix": ((5000, 3), ident, 0),
    "rank3_middle": ((3, 3000, 4), ident, 1),
    "rank4": ((2, 3, 4, 500), ident, -1),
    "transposed": ((64, 3000), lambda x: x.T, 0),
    "negative_strides": ((6, 9000), lambda x: x[::-1, ::-2], 1),
    "sliced_offset": ((10, 600, 4), lambda x: x[2:, 5:590, 1:], 1),
    "extent1_axis": ((4, 1, 5), ident, 1),
    "empty_axis": ((3, 0), ident, 1),
    "empty_rows": ((0, 5000), ident, 1),
}


def sample(dt: str, shape, seed: int = 0) -> np.ndarray:
    """Half the values from the special values of the dtype (ties), half random."""
    rng = np.random.default_rng(seed)
    d = npdtype(dt)
    if d.kind == "b":
        return rng.random(shape) < 0.5
    if d.kind in "iu":
        info = np.iinfo(d)
        pool = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1], d)
        rand = rng.integers(info.min, info.max, shape, dtype=d, endpoint=True)
        return np.where(rng.random(shape) < 0.5, rng.choice(pool, shape), rand)
    fin = ml_dtypes.finfo(d)
    pool = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, float(fin.max),
                     float(fin.tiny)], np.float64).astype(d)
    nan2 = np.array([0x7FC1 if d.itemsize == 2 else 0x7FC00123], f"u{min(d.itemsize, 4)}")
    if d.itemsize == 8:
        nan2 = np.array([0x7FF8000000000123], np.uint64)
    pool = np.concatenate([pool, nan2.view(d)])  # a NaN with a payload
    rand = rng.standard_normal(shape).astype(d)
    return np.where(rng.random(shape) < 0.5, rng.choice(pool, shape), rand)


def reference(v: np.ndarray, axis: int, descending: bool):
    """numpy's stable sort, NaNs last in both directions: (values, int64 indices)."""
    a = np.moveaxis(v, axis, -1)
    if a.dtype.kind == "f" or a.dtype in LOWP:  # bfloat16's kind is "V"; numpy's argsort
        # of it is not a value order in every numpy release
        w = a.astype(np.float64)
        nan = np.isnan(w)
        idx = np.lexsort((np.where(nan, 0.0, -w if descending else w), nan), axis=-1)
    elif descending:  # the ascending sort of the reversed rows, reversed: stable
        n = a.shape[-1]
        idx = (n - 1 - np.argsort(a[..., ::-1], axis=-1, kind="stable"))[..., ::-1]
    else:
        idx = np.argsort(a, axis=-1, kind="stable")
    vals = np.take_along_axis(a, idx, axis=-1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis).astype(np.int64)


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    u = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(u),
                                  np.ascontiguousarray(want).view(u))


def _params():
    return [pytest.param(dt, c, id=f"{dt}-{c}") for dt in DTYPES for c in CASES]


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("dt,case", _params())
def test_matches_numpy(s, dt, case, descending):
    shape, make, axis = CASES[case]
    a = sample(dt, shape)
    v, tv = make(a), make(up(s, a))
    ax = axis % a.ndim
    want_vals, want_idx = reference(v, ax, descending)
    suffix = "" if make is ident else "_read"
    vals, idx = getattr(s, f"sort_with_indices{suffix}")(tv, axis, descending)
    got_idx = down(s, idx)
    assert got_idx.dtype == np.int64
    np.testing.assert_array_equal(got_idx, want_idx)
    same_bits(down(s, vals), want_vals)
    same_bits(down(s, getattr(s, f"sort{suffix}")(tv, axis, descending)), want_vals)


@pytest.mark.parametrize("n", [8, 3000, 1 << 20])
def test_signed_zeros_and_nans_keep_order_and_bits(s, n):
    nan2 = np.array([0x7FC00123, 0xFFC00001], np.uint32).view(np.float32)
    base = np.array([0.0, -0.0, np.nan, 1.0, -0.0, nan2[0], 0.0, -np.inf, nan2[1]], np.float32)
    x = np.resize(base, n)
    for desc in (False, True):
        vals, idx = s.sort_with_indices(up(s, x), 0, desc)
        want_vals, want_idx = reference(x, 0, desc)
        np.testing.assert_array_equal(down(s, idx), want_idx)
        same_bits(down(s, vals), want_vals)


def test_matches_jax_lax_sort(s):
    jax = pytest.importorskip("jax")
    a = sample("float32", (50, 5000), 2)
    for axis in (0, 1):
        want = np.asarray(jax.lax.sort(jax.numpy.asarray(a), dimension=axis, is_stable=True))
        same_bits(down(s, s.sort(up(s, a), axis)), want)


def test_matches_torch_sort(s):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    a = np.random.default_rng(3).standard_normal(1 << 24).astype(np.float32)
    a[::1000] = a[1::1000]  # ties
    for desc in (False, True):
        want_v, want_i = torch.sort(torch.from_numpy(a).cuda(), descending=desc, stable=True)
        vals, idx = s.sort_with_indices(up(s, a), 0, desc)
        np.testing.assert_array_equal(down(s, idx), want_i.cpu().numpy())
        same_bits(down(s, vals), want_v.cpu().numpy())


@pytest.mark.parametrize("dt", ["float32", "int64", "bfloat16"])
def test_same_bits_every_run(s, dt):
    t = up(s, sample(dt, (3, 200000), 4))
    runs = [tuple(down(s, r).tobytes() for r in s.sort_with_indices(t, 1)) for _ in range(2)]
    assert runs[0] == runs[1]


def test_two_to_the_24_float32(s):
    a = np.random.default_rng(5).random(1 << 24, dtype=np.float32)
    same_bits(down(s, s.sort(up(s, a))), np.sort(a, kind="stable"))
