"""numpy reference of the cast projection of docs/dtypes.md (imported by the cast and
elementwise tests of both tiers; defines no tests): every conversion to a float rounds
once to nearest even (computed exactly here, not through ml_dtypes' float32 route), float
-> integer truncates and saturates with NaN -> 0, integer -> integer wraps, complex ->
real keeps the real part, numeric -> bool is != 0."""

from __future__ import annotations

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)


def f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> bfloat16 rounded once: round to odd into float32, then to nearest even."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        f = x.astype(np.float32)
        finite = np.isfinite(x)
        over = finite & (np.abs(f.astype(np.float64)) > np.abs(x))
        f[over] = np.nextafter(f[over], np.float32(0))
        inexact = finite & (f.astype(np.float64) != x)
        bits = f.view(np.uint32)
        bits[inexact] |= np.uint32(1)
    return f.astype(BF16)


def _int_to_bf16(v: int) -> float:
    """An exact integer rounded once to bfloat16 (as a float)."""
    mag = abs(v)
    if mag >= 1 << 24:
        shift = mag.bit_length() - 24
        m = mag >> shift
        if mag & ((1 << shift) - 1):
            m |= 1
        mag = m << shift
    f32 = np.array([mag if v >= 0 else -mag], np.float64).astype(np.float32)
    return float(f32.astype(BF16)[0])


def _round_real(x: np.ndarray, to: np.dtype) -> np.ndarray:
    """float64 values (exact) rounded once to the real float dtype ``to``."""
    if to == BF16:
        return f64_to_bf16(x)
    with np.errstate(all="ignore"):
        return x.astype(to)


def _saturate(f: np.ndarray, to: np.dtype) -> np.ndarray:
    info = np.iinfo(to)
    out = np.zeros(f.shape, to)
    with np.errstate(invalid="ignore"):
        inside = (f > float(info.min)) & (f < float(info.max))
        out[inside] = np.trunc(f[inside]).astype(to)
        out[f <= float(info.min)] = info.min
        out[f >= float(info.max)] = info.max
    return out


def cast_ref(a: np.ndarray, to) -> np.ndarray:
    """The cast projection of docs/dtypes.md."""
    to = np.dtype(to)
    src = a.dtype
    if to == np.bool_:
        return (a.real != 0) | (a.imag != 0) if src.kind == "c" else a.astype(np.float64) != 0
    if src == np.bool_ or src.kind in "iu":
        if to.kind in "iu":
            return a.astype(to)
        if src in (np.int64, np.uint64) and to == BF16:
            return np.array([_int_to_bf16(int(v)) for v in a.ravel()],
                            np.float64).astype(BF16).reshape(a.shape)
        if to.kind == "c":
            real = np.dtype(np.float32 if to == np.complex64 else np.float64)
            return a.astype(real).astype(to)
        if to == np.float16 or to == BF16:
            return _round_real(a.astype(np.float64), to)
        return a.astype(to)
    re = a.real.astype(np.float64) if src.kind == "c" else a.astype(np.float64)
    if to.kind in "iu":
        return _saturate(re, to)
    if to.kind == "c":
        real = np.dtype(np.float32 if to == np.complex64 else np.float64)
        im = a.imag.astype(np.float64) if src.kind == "c" else np.zeros_like(re)
        out = np.empty(a.shape, to)
        out.real = _round_real(re, real)
        out.imag = _round_real(im, real)
        return out
    return _round_real(re, to)
