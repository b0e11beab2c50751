"""argmax / argmin on the GPU against numpy (``np.argmax``: the first index of the
maximum, the first NaN when there is one) and, where jax is installed, ``jax.lax.argmax``:
every ordered dtype x shape class (rank 1-4, split and column passes, block boundaries,
transposed / negative-stride / sliced views, negative axes, extent-1 axes, empty kept
axes), ties, NaN, +-inf, +-0, INT_MIN/INT_MAX; int64 results; the same result every run;
64-bit indexing past 2^31 elements."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "bfloat16", "float32", "float64"]


def npdtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def ident(x):
    return x


CASES = {  # name -> (shape, view (numpy or device alike), axis)
    "rank1_odd": ((7,), ident, 0),
    "rank1_block": ((256,), ident, 0),
    "rank1_block_plus": ((257,), ident, 0),
    "rank1_split": ((123457,), ident, 0),
    "rank1_long": (((1 << 22) + 5,), ident, -1),
    "rows": ((33, 257), ident, 1),
    "rows_split": ((3, 50001), ident, 1),
    "cols": ((257, 33), ident, 0),
    "cols_split": ((20000, 8), ident, 0),
    "middle": ((5, 77, 9), ident, 1),
    "rank4_first": ((6, 5, 4, 3), ident, 0),
    "rank4_negative": ((3, 4, 5, 6), ident, -2),
    "transposed_rows": ((64, 48), lambda x: x.T, 1),
    "transposed_cols": ((64, 48), lambda x: x.T, 0),
    "negative_strides": ((40, 50), lambda x: x[::-1, ::-2], 1),
    "negative_cols": ((40, 50), lambda x: x[::-3, ::-1], 0),
    "sliced_offset": ((10, 60, 4), lambda x: x[2:, 5:50, 1:], 1),
    "extent1_axis": ((4, 1, 5), ident, 1),
    "zero_kept": ((0, 5), ident, 1),
}


def sample(dt: str, shape, seed: int = 0) -> np.ndarray:
    """Few distinct values (ties everywhere) and the dtype's special values."""
    rng = np.random.default_rng(seed)
    d = npdtype(dt)
    if d.kind == "b":
        return rng.random(shape) < 0.2
    if d.kind in "iu":
        info = np.iinfo(d)
        pool = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1], d)
        return rng.choice(pool, shape)
    pool = np.array([-0.0, 0.0, 1.5, -2.0, np.inf, -np.inf, 3.0, 65504.0], np.float32)
    return rng.choice(pool, shape).astype(d)


def reference(kind: str, v: np.ndarray, axis: int) -> np.ndarray:
    w = v.astype(np.float32) if v.dtype in (np.float16, ml_dtypes.bfloat16) else v
    return getattr(np, kind)(w, axis=axis)


def _params():
    return [pytest.param(k, dt, c, id=f"{k}-{dt}-{c}") for k in ("argmax", "argmin")
            for dt in DTYPES for c in CASES]


@pytest.mark.parametrize("kind,dt,case", _params())
def test_matches_numpy(s, kind, dt, case):
    shape, make, axis = CASES[case]
    a = sample(dt, shape)
    v, tv = make(a), make(up(s, a))
    fn = getattr(s, kind if make is ident else f"{kind}_read")
    got = down(s, fn(tv, axis))
    want = reference(kind, v, axis)
    assert got.dtype == np.int64 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["argmax", "argmin"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("case", ["rank1_split", "rows", "rows_split", "cols_split",
                                  "negative_strides"])
def test_first_nan_wins(s, kind, dt, case):
    shape, make, axis = CASES[case]
    a = sample(dt, shape, 1)
    flat = a.reshape(-1)
    flat[flat.size // 3::max(1, flat.size // 5)] = np.nan
    flat[-1] = np.nan
    got = down(s, getattr(s, f"{kind}_read")(make(up(s, a)), axis))
    np.testing.assert_array_equal(got, reference(kind, make(a), axis))


def test_matches_jax(s):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    a = sample("float32", (37, 1000), 2)
    a[5, 400] = a[9, 30] = np.nan  # one NaN a row: jax's reducer picks any of several
    a[7, :] = 0.0
    a[7, 3] = -0.0
    for kind, fn in (("argmax", jax.lax.argmax), ("argmin", jax.lax.argmin)):
        for axis in (0, 1):
            want = np.asarray(fn(jnp.asarray(a), axis, jnp.int32))
            np.testing.assert_array_equal(down(s, getattr(s, kind)(up(s, a), axis)), want)


def test_same_result_every_run(s):
    a = sample("float32", (4096, 4096), 3)
    t = up(s, a)
    for axis in (0, 1):
        runs = [down(s, s.argmax(t, axis)).tobytes() for _ in range(2)]
        assert runs[0] == runs[1]


def test_more_than_2_31_elements_use_64_bit_indices(s):
    n = (1 << 31) + 77
    a = np.zeros(n, np.uint8)
    a[n - 2] = 9
    a[(1 << 31) + 1] = 9  # the first of the two maxima lies past 2^31
    t = up(s, a)
    assert down(s, s.argmax(t, 0)) == (1 << 31) + 1
    assert down(s, s.argmin(t, 0)) == 0
