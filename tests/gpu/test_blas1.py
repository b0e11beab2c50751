"""BLAS-1 on the GPU against numpy: vdot_read (sum of conj(a)*b), norm_squared_read (sum of
|x|^2, real result) and axpby_read_into_accum (y <- alpha*x + beta*y in place) for every
numeric dtype, sizes from 0 to millions, compact and strided views. Integers wrap,
float16/bfloat16 accumulate in float32, beta == 0 does not read y, results are rank-0
device tensors with the same bits every run."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc

DTYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16",
          "bfloat16", "float32", "float64", "complex64", "complex128"]
LOWP = {"float16": np.float32, "bfloat16": np.float32}
SIZES = {"empty": (0,), "one": (1,), "odd": (1001,), "matrix": (37, 129), "rank4": (3, 5, 7, 9),
         "large": (1 << 20,), "many_blocks": (3_000_001,)}


def npdtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def real_dtype(d: np.dtype) -> np.dtype:
    return {"complex64": np.dtype(np.float32), "complex128": np.dtype(np.float64)}.get(d.name, d)


def eps(d: np.dtype) -> float:
    return float(ml_dtypes.finfo(real_dtype(d)).eps)


def sample(dt: str, shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = npdtype(dt)
    if d.kind in "iu":
        return rng.integers(0 if d.kind == "u" else -100, 100, shape).astype(d)
    a = rng.standard_normal(shape)
    if d.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(d)


def wide(a: np.ndarray) -> np.ndarray:
    return a.astype({"i": np.int64, "u": np.int64, "c": np.complex128}.get(a.dtype.kind,
                                                                             np.float64))


def close(got: np.ndarray, ref, scale, dtype: np.dtype) -> None:
    """Integers exactly (wrapped); floats within the result's rounding plus 8 eps of the
    accumulator times ``scale`` (the sum of magnitudes)."""
    ref = np.asarray(ref)
    if dtype.kind in "iu":
        np.testing.assert_array_equal(got, ref.astype(dtype))
        return
    acc = eps(np.dtype(LOWP.get(dtype.name, real_dtype(dtype))))
    err = np.abs(wide(np.asarray(got)) - ref)
    tol = eps(dtype) * np.abs(ref) + 8 * acc * np.asarray(scale) + 1e-300
    assert (err <= tol).all(), f"error {np.max(err)} > {np.max(tol)}"


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("dt", DTYPES)
def test_vdot(s, dt, size):
    a, b = sample(dt, SIZES[size], 1), sample(dt, SIZES[size], 2)
    out = s.vdot_read(up(s, a), up(s, b))
    assert isinstance(out, tc.Tensor) and out.shape == () and out.dtype.numpy == a.dtype
    wa, wb = wide(a), wide(b)
    close(down(s, out), np.sum(np.conj(wa) * wb), np.sum(np.abs(wa * wb)), a.dtype)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("dt", DTYPES)
def test_norm_squared(s, dt, size):
    a = sample(dt, SIZES[size], 3)
    if a.dtype == np.float16:  # keep the sum of squares inside float16's range
        a = (a * np.float16(2.0 ** -6)).astype(np.float16)
    out = s.norm_squared_read(up(s, a))
    real = real_dtype(a.dtype)
    assert out.shape == () and out.dtype.numpy == real
    wa = wide(a)
    ref = np.sum((wa * np.conj(wa)).real)
    close(down(s, out), ref, ref, real)


VIEWS = {  # name -> (x view, y view) of a (30, 41) array (numpy or device alike)
    "transposed": (lambda t: t.T, lambda t: t.T),
    "negative": (lambda t: t[::-1, ::-2], lambda t: t[:, ::-2]),
    "sliced": (lambda t: t[3:17, 5:], lambda t: t[10:24, :36]),
    "mixed": (lambda t: t.T[::2], lambda t: t[:, ::2].T),
}


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("dt", DTYPES)
def test_vdot_and_norm_of_views(s, dt, view):
    fa, fb = VIEWS[view]
    a, b = sample(dt, (30, 41), 4), sample(dt, (30, 41), 5)
    ta, tb = up(s, a), up(s, b)
    va, vb = wide(fa(a)), wide(fb(b))
    close(down(s, s.vdot_read(fa(ta), fb(tb))), np.sum(np.conj(va) * vb),
          np.sum(np.abs(va * vb)), a.dtype)
    ref = np.sum((va * np.conj(va)).real)
    close(down(s, s.norm_squared_read(fa(ta))), ref, ref, real_dtype(a.dtype))


SCALARS = {"i": (3, -2), "u": (3, 2), "f": (1.5, -0.5), "V": (1.5, -0.5), "c": (1 + 2j, 0.5 - 1j)}
LAYOUTS = {  # name -> (x array shape, x view, y array shape, y view); views are (64, 50)
    "compact": ((64, 50), lambda t: t, (64, 50), lambda t: t),
    "x_transposed": ((50, 64), lambda t: t.T, (64, 50), lambda t: t),
    "strided_y": ((64, 50), lambda t: t, (128, 50), lambda t: t[1::2]),
    "negative": ((64, 50), lambda t: t[::-1, ::-1], (64, 50), lambda t: t[:, ::-1]),
    "transposed_both": ((50, 64), lambda t: t.T, (50, 70), lambda t: t[:, 3:67].T),
}


@pytest.mark.parametrize("beta_zero", [False, True], ids=["beta", "beta0"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dt", DTYPES)
def test_axpby(s, dt, layout, beta_zero):
    xshape, fx, yshape, fy = LAYOUTS[layout]
    x, y = sample(dt, xshape, 6), sample(dt, yshape, 7)
    alpha, beta = SCALARS[x.dtype.kind]
    if beta_zero:
        beta = 0
        if x.dtype.kind not in "iu":
            y[:] = np.nan  # y is not read when beta == 0
    ty = up(s, y)
    assert s.axpby_read_into_accum(alpha, fx(up(s, x)), beta, fy(ty)) is None
    vx, vy = wide(fx(x)), wide(fy(y))
    want, scale = wide(y), np.zeros(y.shape)
    fy(want)[...] = alpha * vx + (beta * vy if beta else 0)  # writes through the view
    fy(scale)[...] = np.abs(alpha * vx) + (np.abs(beta * vy) if beta else 0)
    got = wide(down(s, ty))
    if x.dtype.kind in "iu":
        np.testing.assert_array_equal(got, wide(want.astype(x.dtype)))
        return
    acc = eps(np.dtype(LOWP.get(x.dtype.name, real_dtype(x.dtype))))
    err = np.abs(got - want)
    ok = (err <= eps(x.dtype) * np.abs(want) + 4 * acc * scale) | (np.isnan(want) &
                                                                  np.isnan(got))
    assert ok.all(), f"error {np.nanmax(err)}"


def test_same_bits_every_run(s):
    a = np.random.default_rng(9).standard_normal(1 << 24).astype(np.float32)
    b = np.random.default_rng(10).standard_normal(1 << 24).astype(np.float32)
    ta, tb = up(s, a), up(s, b)
    dots = [down(s, s.vdot_read(ta, tb)).tobytes() for _ in range(3)]
    norms = [down(s, s.norm_squared_read(ta)).tobytes() for _ in range(3)]
    assert dots[0] == dots[1] == dots[2] and norms[0] == norms[1] == norms[2]
