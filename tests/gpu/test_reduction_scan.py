"""cumsum / cumprod / cummax / cummin on the GPU against numpy (``np.cumsum(x,
dtype=x.dtype)`` for integers, float64 sums for floats, ``np.maximum.accumulate``) and,
where jax is installed, ``jax.lax.cumsum``/``cummax`` with ``reverse``: every dtype x
shape class (rank 1-4, one tile, several tiles and several levels of totals, columns with
and without chunks, short rows, transposed / negative-stride / sliced views, negative
axes, extent-1 and empty axes), both directions; NaN, +-inf, INT_MIN/INT_MAX wrapping;
float16/bfloat16 accumulate in float32; the same bits every run."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
          "bfloat16", "float32", "float64", "complex64", "complex128"]
NAMES = {"sum": "cumsum", "prod": "cumprod", "max": "cummax", "min": "cummin"}
LOWP = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def npdtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def ident(x):
    return x


CASES = {  # name -> (shape, view, axis)
    "rank1_short": ((7,), ident, 0),
    "rank1_one_tile": ((2048,), ident, 0),
    "rank1_two_tiles": ((2049,), ident, 0),
    "rank1_levels": (((1 << 22) + 3,), ident, 0),
    "rows": ((33, 1000), ident, 1),
    "rows_tiles": ((3, 50001), ident, -1),
    "short_rows": ((1000, 10), ident, 1),
    "cols": ((1000, 33), ident, 0),
    "cols_chunks": ((100000, 3), ident, 0),
    "middle": ((5, 77, 9), ident, 1),
    "rank4": ((3, 4, 5, 6), ident, 2),
    "transposed": ((64, 300), lambda x: x.T, 0),
    "negative_strides": ((40, 500), lambda x: x[::-1, ::-2], 1),
    "sliced_offset": ((10, 60, 4), lambda x: x[2:, 5:50, 1:], -2),
    "extent1_axis": ((4, 1, 5), ident, 1),
    "empty_axis": ((3, 0), ident, 1),
    "empty_rows": ((0, 5), ident, 1),
}


def sample(dt: str, shape, kind: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = npdtype(dt)
    if d.kind in "iu":
        if kind == "prod":
            return rng.choice(np.array([1, 1, 1, 3, 255 if d.kind == "u" else -1]),
                              shape).astype(d)
        info = np.iinfo(d)
        a = rng.integers(0 if d.kind == "u" else -100, 100, shape).astype(d)
        a.reshape(-1)[::97] = info.max  # sums wrap
        a.reshape(-1)[5::89] = info.min
        return a
    if kind in ("max", "min"):
        a = rng.standard_normal(shape)
        a.reshape(-1)[::53] = np.inf
        a.reshape(-1)[7::61] = -np.inf
        a.reshape(-1)[3::41] = -0.0
        return a.astype(d)
    a = 1 + 0.001 * rng.standard_normal(shape) if kind == "prod" else rng.standard_normal(shape)
    if d.kind == "c":
        a = a + 1j * (0.001 if kind == "prod" else 1) * rng.standard_normal(shape)
    return a.astype(d)


def wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def reference(kind: str, v: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    if reverse:
        return np.flip(reference(kind, np.flip(v, axis), axis, False), axis)
    if kind in ("max", "min"):
        w = v.astype(np.float32) if v.dtype in LOWP else v
        return {"max": np.maximum, "min": np.minimum}[kind].accumulate(w, axis=axis)
    fn = np.cumsum if kind == "sum" else np.cumprod
    return fn(v, axis=axis, dtype=v.dtype) if v.dtype.kind in "iu" else fn(wide(v), axis=axis)


def _real(d: np.dtype):
    return {"complex64": np.float32, "complex128": np.float64}.get(d.name, d)


def eps(d: np.dtype) -> float:
    return float(ml_dtypes.finfo(_real(d)).eps)


def subnormal_step(d: np.dtype) -> float:
    """The spacing of the dtype's subnormals: the absolute rounding of a result below its
    normal range (a long product decays there: float16 after ~10^6 factors near 1)."""
    return float(ml_dtypes.finfo(_real(d)).smallest_subnormal)


def check(kind: str, got: np.ndarray, v: np.ndarray, axis: int, reverse: bool) -> None:
    """Integers and max/min exactly; sums and products within the rounding of each result
    (relative, and one subnormal step below the normal range) plus the accumulation error
    (8 eps of the accumulator times the running magnitude)."""
    ref = reference(kind, v, axis, reverse)
    assert got.dtype == v.dtype and got.shape == v.shape
    if v.dtype.kind in "iu":
        np.testing.assert_array_equal(got, ref)
        return
    if kind in ("max", "min"):
        np.testing.assert_array_equal(wide(got), wide(ref.astype(v.dtype)))
        return
    acc = eps(np.dtype(np.float32)) if v.dtype in LOWP else eps(v.dtype)
    n = max(v.shape[axis], 1)
    if kind == "sum":
        tol = eps(v.dtype) * np.abs(ref) + 8 * acc * reference("sum", np.abs(wide(v)), axis,
                                                               reverse)
    else:
        tol = (eps(v.dtype) + 8 * acc * np.sqrt(n)) * np.abs(ref)
    tol = tol + subnormal_step(v.dtype)
    err = np.abs(wide(got) - ref)
    bad = np.flatnonzero(~(err <= tol + 1e-300))
    if bad.size:
        i = np.unravel_index(bad[np.argmax((err / (tol + 1e-300)).ravel()[bad])], err.shape)
        raise AssertionError(f"{bad.size} over the bound; worst at {i}: got {got[i]}, want "
                             f"{ref[i]}, bound {tol[i]}")


def _params():
    out = []
    for kind in NAMES:
        for dt in DTYPES:
            if kind in ("max", "min") and dt.startswith("complex"):
                continue
            out += [pytest.param(kind, dt, c, id=f"{kind}-{dt}-{c}") for c in CASES]
    return out


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("kind,dt,case", _params())
def test_matches_numpy(s, kind, dt, case, reverse):
    shape, make, axis = CASES[case]
    a = sample(dt, shape, kind)
    v, tv = make(a), make(up(s, a))
    name = NAMES[kind] if make is ident else f"{NAMES[kind]}_read"
    check(kind, down(s, getattr(s, name)(tv, axis, reverse)), v, axis % a.ndim, reverse)


@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("case", ["rank1_levels", "rows_tiles", "cols_chunks", "transposed"])
def test_nan_propagates(s, dt, case):
    shape, make, axis = CASES[case]
    a = sample(dt, shape, "max", 1)
    a.reshape(-1)[a.size // 2] = np.nan
    v, tv = make(a), make(up(s, a))
    for kind in ("max", "min"):
        for reverse in (False, True):
            got = down(s, getattr(s, NAMES[kind])(tv, axis, reverse))
            ref = reference(kind, v, axis % a.ndim, reverse)
            np.testing.assert_array_equal(np.isnan(wide(got)), np.isnan(ref))
            ok = ~np.isnan(ref)
            np.testing.assert_array_equal(wide(got)[ok], wide(ref.astype(v.dtype))[ok])


def test_low_precision_accumulates_in_float32(s):
    a = np.ones(5000, np.float16)  # a float16 running sum would stop at 2048
    np.testing.assert_array_equal(down(s, s.cumsum(up(s, a), 0)).astype(np.float32),
                                  np.arange(1, 5001, dtype=np.float16).astype(np.float32))


def test_matches_jax(s):
    jax = pytest.importorskip("jax")
    a = sample("float32", (300, 2500), "max", 4)
    a[7, 100] = np.nan
    b = sample("int32", (300, 2500), "sum", 5)
    for axis in (0, 1):
        for reverse in (False, True):
            want = np.asarray(jax.lax.cummax(jax.numpy.asarray(a), axis, reverse))
            got = down(s, s.cummax(up(s, a), axis, reverse))
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
            want = np.asarray(jax.lax.cumsum(jax.numpy.asarray(b), axis, reverse))
            np.testing.assert_array_equal(down(s, s.cumsum(up(s, b), axis, reverse)), want)


@pytest.mark.parametrize("case", ["rank1_levels", "rows_tiles", "cols_chunks", "short_rows"])
def test_same_bits_every_run(s, case):
    shape, make, axis = CASES[case]
    t = make(up(s, sample("float32", shape, "sum", 6)))
    runs = [down(s, s.cumsum_read(t, axis)).tobytes() for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
