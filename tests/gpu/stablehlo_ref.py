"""numpy reference of the StableHLO elementwise ops added to the library's first set:
rounding (floor, ceil, round_nearest_even, round_nearest_afz), is_finite, logistic, tan,
atan2, cbrt, real, imag, complex, the bitwise ops, the shifts, popcnt and
count_leading_zeros (docs/dtypes.md). ``test_elementwise_ref.REF`` includes ``MORE_REF``;
``MORE_INPUTS`` gives operands where random full-range ones would miss the interesting
part (shift amounts). Self-contained (no import of test_elementwise_ref), defines no tests.

Integer ops work on the two's-complement bits of each value as a Python int; shift
amounts are the rhs read as unsigned, so an amount of the bit width or more (a negative
one included) gives 0 (left, logical) or the sign fill (arithmetic), as StableHLO's
reference interpreter (APInt shifts) and XLA do.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

_LOWP = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _in_f32(fn, *arrays):
    """``fn`` computed in float32 and rounded once for half/bfloat16, else in the dtype."""
    dt = arrays[0].dtype
    with np.errstate(all="ignore"):
        if dt in _LOWP:
            return np.asarray(fn(*[a.astype(np.float32) for a in arrays])).astype(dt)
        return np.asarray(fn(*arrays)).astype(dt)


def _unary(fn):
    return lambda a: (_in_f32(fn, a), False)


def _round_afz(x):
    """Ties away from zero, exactly (no x + 0.5, which rounds for large odd x)."""
    t = np.trunc(x)
    away = np.abs(x - t) >= 0.5  # x - t is exact
    return np.where(away, t + np.sign(x), t).astype(x.dtype)


def is_finite(a):
    wide = a.astype(np.float32) if a.dtype in _LOWP else a
    return np.isfinite(wide), False


def real(a):
    return (np.real(a).copy() if a.dtype.kind == "c" else a.copy()), False


def imag(a):
    return (np.imag(a).copy() if a.dtype.kind == "c" else np.zeros_like(a)), False


def complex_(a, b):
    out = np.empty(np.shape(a), np.complex64 if a.dtype == np.float32 else np.complex128)
    out.real, out.imag = a, b  # parts set as given (a + 1j * b would mix inf into NaN)
    return out, False


def _times_i(z):
    """i * z exactly: (-Im z, Re z)."""
    out = np.empty_like(z)
    out.real, out.imag = -z.imag, z.real
    return out


def _complex_in_128(fn, *arrays):
    dt = arrays[0].dtype
    with np.errstate(all="ignore"):
        return np.asarray(fn(*[a.astype(np.complex128) for a in arrays])).astype(dt)


def _ctan(z):
    w = np.tanh(_times_i(z))  # tan z = -i tanh(i z)
    return -_times_i(w)


def _catan2(y, x):
    lg = np.log((x + _times_i(y)) / np.sqrt(x * x + y * y))
    return -_times_i(lg)


def _ccbrt(z):
    r, th = np.cbrt(np.abs(z)), np.angle(z) / 3
    out = np.empty_like(z)
    out.real, out.imag = r * np.cos(th), r * np.sin(th)
    return out


def _logistic(x):
    return 1 / (1 + np.exp(-x))


def _analytic(real_fn, complex_fn):
    def ref(*arrays):
        if arrays[0].dtype.kind == "c":
            return _complex_in_128(complex_fn, *arrays), False
        return _in_f32(real_fn, *arrays), False
    return ref


# --- integers --------------------------------------------------------------------------
def bits_of(dt) -> int:
    return np.dtype(dt).itemsize * 8


def _wrap(values: list[int], dt, shape) -> np.ndarray:
    """Python ints (any size) as the two's-complement values of ``dt``."""
    bits, signed = bits_of(dt), np.dtype(dt).kind == "i"
    mask = (1 << bits) - 1
    out = [(v & mask) - ((1 << bits) if signed and (v & mask) >> (bits - 1) else 0)
           for v in values]
    return np.array(out, dtype=object).astype(dt).reshape(shape)


def _int_map(fn):
    """``fn(a, b, bits)`` on each element pair as unsigned Python ints (the bit patterns)."""
    def ref(a, *rest):
        bits = bits_of(a.dtype)
        mask = (1 << bits) - 1
        cols = [[int(v) & mask for v in np.asarray(x).reshape(-1)] for x in (a, *rest)]
        return _wrap([fn(*vals, bits) for vals in zip(*cols)], a.dtype, np.shape(a)), False
    return ref


def _signed(u: int, bits: int) -> int:
    return u - (1 << bits) if u >> (bits - 1) else u


def _sra(u: int, n: int, bits: int) -> int:
    s = _signed(u, bits)
    return (-1 if s < 0 else 0) if n >= bits else s >> n


def _bitwise(np_fn):
    return lambda *arrays: (np_fn(*arrays).astype(arrays[0].dtype), False)


MORE_REF = {
    "floor": _unary(np.floor), "ceil": _unary(np.ceil),
    "round_nearest_even": _unary(np.rint), "round_nearest_afz": _unary(_round_afz),
    "is_finite": is_finite, "real": real, "imag": imag, "complex": complex_,
    "logistic": _analytic(_logistic, _logistic), "tan": _analytic(np.tan, _ctan),
    "atan2": _analytic(np.arctan2, _catan2), "cbrt": _analytic(np.cbrt, _ccbrt),
    "bitwise_and": _bitwise(np.bitwise_and), "bitwise_or": _bitwise(np.bitwise_or),
    "bitwise_xor": _bitwise(np.bitwise_xor), "bitwise_not": _bitwise(np.invert),
    "shift_left": _int_map(lambda u, n, bits: 0 if n >= bits else u << n),
    "shift_right_logical": _int_map(lambda u, n, bits: 0 if n >= bits else u >> n),
    "shift_right_arithmetic": _int_map(_sra),
    "popcnt": _int_map(lambda u, bits: bin(u).count("1")),
    "count_leading_zeros": _int_map(lambda u, bits: bits - u.bit_length()),
}
SHIFTS = ("shift_left", "shift_right_logical", "shift_right_arithmetic")
# Tolerance class of each op (test_elementwise_ref.tolerance): transcendental or exact.
TRANSCENDENTAL = ("logistic", "tan", "atan2", "cbrt")


def shift_amounts(rng, dt, shape) -> np.ndarray:
    """Shift amounts: mostly below the bit width, some at or past it, some negative."""
    bits = bits_of(dt)
    n = rng.integers(0, bits, size=shape, dtype=np.int64)
    wild = full_range(rng, dt, shape).astype(np.int64)  # uint64: wraps, a bit pattern
    edge = rng.choice(np.array([bits - 1, bits, bits + 1], np.int64), size=shape)
    pick = rng.integers(0, 8, size=shape)
    return np.where(pick == 0, wild, np.where(pick == 1, edge, n)).astype(dt)


def full_range(rng, dt, shape) -> np.ndarray:
    """Uniform values over all of the integer dtype ``dt``."""
    info = np.iinfo(dt)
    wide = np.uint64 if np.dtype(dt) == np.uint64 else np.int64
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=wide).astype(dt)


def _shift_inputs(rng, dt, shape):
    return [full_range(rng, dt, shape), shift_amounts(rng, dt, shape)]


MORE_INPUTS = {key: _shift_inputs for key in SHIFTS}
