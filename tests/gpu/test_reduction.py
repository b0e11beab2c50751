"""Reductions on the GPU against numpy: every op x dtype x shape class (rank 0-6, zero-size
axes, odd sizes, transposed / negative-stride / sliced views; no, one, several, all and
non-adjacent axes). float16/bfloat16 accumulate in float32 and integers wrap (the numpy
reference is ``np.sum(x, dtype=x.dtype)``); max/min propagate NaN; the same input gives the
same bits every run."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
          "bfloat16", "float32", "float64", "complex64", "complex128"]
KINDS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
LOWP = {"float16": np.float32, "bfloat16": np.float32}


def npdtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def perm(x, p):
    return x.transpose(p) if isinstance(x, np.ndarray) else x.permute(p)


def ident(x):
    return x


CASES = {  # name -> (shape, view of the array (numpy or device alike), axes)
    "rank0": ((), ident, ()),
    "rank1_odd": ((7,), ident, (0,)),
    "rank1_all": ((1000,), ident, (0,)),
    "rows": ((33, 257), ident, (1,)),
    "cols": ((257, 33), ident, (0,)),
    "cols_vectors": ((300, 64), ident, (0,)),
    "split_all": ((123457,), ident, (0,)),
    "split_rows": ((3, 50001), ident, (1,)),
    "split_cols": ((20000, 8), ident, (0,)),
    "middle": ((5, 77, 9), ident, (1,)),
    "non_adjacent": ((4, 5, 6, 7), ident, (0, 2)),
    "several": ((4, 5, 6, 7), ident, (1, 2, 3)),
    "all_rank4": ((4, 5, 6, 7), ident, (0, 1, 2, 3)),
    "none": ((4, 5), ident, ()),
    "rank6": ((2, 3, 4, 1, 3, 2), lambda x: perm(x, (5, 3, 1, 0, 2, 4)), (0, 2, 5)),
    "zero_kept": ((0, 5), ident, (1,)),
    "zero_reduced": ((5, 0), ident, (1,)),
    "transposed_cols": ((64, 48), lambda x: x.T, (0,)),
    "transposed_rows": ((64, 48), lambda x: x.T, (1,)),
    "negative_rows": ((40, 50), lambda x: x[::-1, ::-2], (1,)),
    "negative_cols": ((40, 50), lambda x: x[::-1, ::-2], (0,)),
    "sliced_offset": ((10, 60, 4), lambda x: x[2:, 5:50, 1:], (1,)),
}


def sample(dt: str, shape, kind: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = npdtype(dt)
    if d.kind in "iu":
        if kind == "prod":  # odd factors keep wrapped products away from 0
            return rng.choice(np.array([1, 1, 1, 3, 255 if d.kind == "u" else -1]),
                              shape).astype(d)
        return rng.integers(0 if d.kind == "u" else -100, 100, shape).astype(d)
    a = 1 + 0.01 * rng.standard_normal(shape) if kind == "prod" else rng.standard_normal(shape)
    if d.kind == "c":
        a = a + 1j * (0.01 if kind == "prod" else 1) * rng.standard_normal(shape)
    return a.astype(d)


def real_dtype(d: np.dtype) -> np.dtype:
    return {"complex64": np.dtype(np.float32), "complex128": np.dtype(np.float64)}.get(d.name, d)


def eps(d: np.dtype) -> float:
    return float(ml_dtypes.finfo(real_dtype(d)).eps)


def wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def check(kind: str, got: np.ndarray, v: np.ndarray, axes: tuple[int, ...]) -> None:
    """Integers and max/min exactly; sums and products within the rounding of the result
    plus the accumulation error (eps of the accumulator times the sum of magnitudes)."""
    if v.dtype.kind in "iu":
        ref = KINDS[kind](v, axis=axes, dtype=v.dtype) if kind in ("sum", "prod") else \
            KINDS[kind](v, axis=axes)
        assert got.dtype == ref.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
        return
    ref = KINDS[kind](wide(v), axis=axes)
    assert got.dtype == v.dtype and got.shape == np.shape(ref)
    if kind in ("max", "min"):
        np.testing.assert_array_equal(wide(got), np.asarray(ref).astype(v.dtype).astype(ref.dtype))
        return
    out, acc = eps(v.dtype), eps(np.dtype(LOWP.get(v.dtype.name, real_dtype(v.dtype))))
    n = int(np.prod([v.shape[i] for i in axes]))
    if kind == "sum":
        tol = out * np.abs(ref) + 8 * acc * np.sum(np.abs(wide(v)), axis=axes)
    else:
        tol = (out + 8 * acc * np.sqrt(max(n, 1))) * np.abs(ref)
    err = np.abs(wide(got) - ref)
    assert (err <= tol + 1e-300).all(), f"max error {np.max(err)} > {np.max(tol)}"


def _params():
    out = []
    for dt in DTYPES:
        for kind in KINDS:
            if kind in ("max", "min") and dt.startswith("complex"):
                continue
            out += [pytest.param(kind, dt, c, id=f"{kind}-{dt}-{c}") for c in CASES]
    return out


@pytest.mark.parametrize("kind,dt,case", _params())
def test_reduce_matches_numpy(s, kind, dt, case):
    shape, make, axes = CASES[case]
    a = sample(dt, shape, kind)
    v, tv = make(a), make(up(s, a))
    n = int(np.prod([v.shape[i] for i in axes]))
    fn = getattr(s, f"reduce_{kind}" + ("" if make is ident else "_read"))
    if n == 0 and kind in ("max", "min"):
        with pytest.raises(tc.ValidationError):
            fn(tv, axes)
        return
    check(kind, down(s, fn(tv, axes)), v, axes)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("case", ["rows", "cols", "split_all", "non_adjacent"])
def test_nan_propagates(s, kind, dt, case):
    shape, make, axes = CASES[case]
    a = sample(dt, shape, kind, 1)
    a.reshape(-1)[a.size // 2] = np.nan
    a.reshape(-1)[-1] = np.inf
    got = down(s, getattr(s, f"reduce_{kind}")(make(up(s, a)), axes))
    ref = KINDS[kind](wide(make(a)), axis=axes)
    np.testing.assert_array_equal(np.isnan(wide(got)), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_array_equal(wide(got)[ok], ref[ok])


@pytest.mark.parametrize("axes", [(0, 1), (0,), (1,)], ids=["all", "axis0", "axis1"])
def test_same_bits_every_run(s, axes):
    a = np.random.default_rng(7).standard_normal((4096, 4096)).astype(np.float32)
    t = up(s, a)
    runs = [down(s, s.reduce_sum(t, axes)).tobytes() for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize("axes", [(0,), (1,)], ids=["cols", "rows"])
def test_low_precision_accumulates_in_float32(s, axes):
    a = np.ones((3000, 3000), np.float16)  # a float16 accumulator would stop at 2048
    np.testing.assert_array_equal(down(s, s.reduce_sum(up(s, a), axes)), np.full(3000, 3000))
    b = np.ones((4097, 4097), ml_dtypes.bfloat16)  # a bfloat16 one would stop at 256
    np.testing.assert_array_equal(down(s, s.reduce_sum(up(s, b), axes)).astype(np.float32),
                                  np.full(4097, 4096.0, np.float32))


def test_integers_wrap(s):
    a = np.full(1000, 100, np.int8)
    assert down(s, s.reduce_sum(up(s, a), (0,))) == np.sum(a, dtype=np.int8)
    b = np.full(40, 3, np.int32)
    assert down(s, s.reduce_prod(up(s, b), (0,))) == np.prod(b, dtype=np.int32)


def test_more_than_2_31_elements_use_64_bit_indices(s):
    rows = (1 << 25) + 3
    t = up(s, np.ones((rows, 64), np.uint8))  # 2^31 + 192 elements
    assert down(s, s.reduce_sum(t, (0, 1))) == (rows * 64) % 256
    assert down(s, s.reduce_max(t, (0, 1))) == 1
    np.testing.assert_array_equal(down(s, s.reduce_sum(t, (0,))), np.full(64, rows % 256))
    per_row = down(s, s.reduce_sum(t, (1,)))
    assert per_row.shape == (rows,) and (per_row == 64).all()
