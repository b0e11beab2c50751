"""numpy reference of the elementwise, analytic and cast semantics (docs/dtypes.md), the
per-dtype tolerances and input generators; imported by the elementwise test modules of
both tiers (tests/gpu is on sys.path). Defines no tests itself.

``REF[name](*arrays) -> (result, error)``: ``error`` is True when the device must raise
the deferred error (integer division by zero, negative integer exponent).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from stablehlo_ref import MORE_INPUTS, MORE_REF, TRANSCENDENTAL

BF16 = np.dtype(ml_dtypes.bfloat16)
LOWP = (np.dtype(np.float16), BF16)
INT_BITS = {np.dtype(t): 8 * np.dtype(t).itemsize for t in (
    np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)}


def is_int(dt) -> bool:
    return np.dtype(dt) in INT_BITS


def wrap_ints(values, dt) -> np.ndarray:
    """Python ints (object array) wrapped into the integer dtype ``dt``."""
    bits = INT_BITS[np.dtype(dt)]
    signed = np.dtype(dt).kind == "i"
    if bits < 32 or (bits == 32 and signed):
        # exact in int64 (products of two int32 values fit, uint32 ones may not); astype wraps
        return np.asarray(values, dtype=object).astype(np.int64).astype(dt)
    mask = (1 << bits) - 1

    def one(v):
        v = int(v) & mask
        return v - (1 << bits) if signed and v >> (bits - 1) else v

    flat = [one(v) for v in np.asarray(values, dtype=object).reshape(-1)]
    return np.array(flat, dtype=object).astype(dt).reshape(np.shape(values))


def _objs(a) -> np.ndarray:
    return np.asarray(a).astype(object)


def _via_f32(fn, *arrays):
    """Compute in float32 and round once (half/bfloat16), else in the dtype itself."""
    dt = arrays[0].dtype
    if dt in LOWP:
        with np.errstate(all="ignore"):
            return fn(*[a.astype(np.float32) for a in arrays]).astype(dt)
    with np.errstate(all="ignore"):
        return np.asarray(fn(*arrays)).astype(dt)


def _arith(op):
    def ref(a, b):
        if is_int(a.dtype):
            return wrap_ints(op(_objs(a), _objs(b)), a.dtype), False
        return _via_f32(op, a, b), False
    return ref


def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x >= 0) == (y > 0) else -q


def div(a, b):
    if is_int(a.dtype):
        err = bool(np.any(b == 0))
        q = [0 if y == 0 else _trunc_div(int(x), int(y)) for x, y in zip(a.ravel(), b.ravel())]
        return wrap_ints(np.array(q, dtype=object).reshape(a.shape), a.dtype), err
    if a.dtype.kind == "c":
        with np.errstate(all="ignore"):
            return a / b, False
    return _via_f32(np.divide, a, b), False


def rem(a, b):
    if is_int(a.dtype):
        err = bool(np.any(b == 0))
        r = [0 if y == 0 else int(x) - _trunc_div(int(x), int(y)) * int(y)
             for x, y in zip(a.ravel(), b.ravel())]
        return wrap_ints(np.array(r, dtype=object).reshape(a.shape), a.dtype), err
    return _via_f32(np.fmod, a, b), False


def pow_(a, b):
    if is_int(a.dtype):
        bits = INT_BITS[a.dtype]
        err = bool(np.any(b < 0))
        r = [0 if int(y) < 0 else pow(int(x), int(y), 1 << bits)
             for x, y in zip(a.ravel(), b.ravel())]
        return wrap_ints(np.array(r, dtype=object).reshape(a.shape), a.dtype), err
    return _via_f32(np.power, a, b), False


def _pick(a, b, take_a):
    return np.where(take_a, a, b)


def maximum(a, b):
    if a.dtype == np.bool_:
        return a | b, False
    x, y = _wide(a), _wide(b)
    with np.errstate(invalid="ignore"):
        return _pick(a, b, (x >= y) | (x != x)).astype(a.dtype), False


def minimum(a, b):
    if a.dtype == np.bool_:
        return a & b, False
    x, y = _wide(a), _wide(b)
    with np.errstate(invalid="ignore"):
        return _pick(a, b, (x <= y) | (x != x)).astype(a.dtype), False


def _wide(a):
    return a.astype(np.float32) if a.dtype in LOWP else a


def neg(a):
    if is_int(a.dtype):
        return wrap_ints(-_objs(a), a.dtype), False
    return (-a).astype(a.dtype), False


def conj(a):
    return (np.conj(a) if a.dtype.kind == "c" else a.copy()), False


def abs_(a):
    if is_int(a.dtype):
        return wrap_ints(np.abs(_objs(a)), a.dtype), False
    return np.abs(a), False


def sign(a):
    if a.dtype.kind == "c":
        with np.errstate(all="ignore"):
            h = np.abs(a)
            out = np.where(h == 0, 0, a / np.where(h == 0, 1, h)).astype(a.dtype)
        return out, False
    if is_int(a.dtype):
        return ((a > 0).astype(np.int64) - (a < 0)).astype(a.dtype), False
    x = _wide(a)
    with np.errstate(invalid="ignore"):
        r = np.where(x > 0, 1, np.where(x < 0, -1, x))  # +-0 and NaN as given (jax.lax)
    return r.astype(a.dtype), False


def compare(direction):
    fn = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
          "GT": np.greater, "GE": np.greater_equal}[direction]

    def ref(a, b):
        with np.errstate(invalid="ignore"):
            return fn(_wide(a), _wide(b)), False
    return ref


def select(p, t, f):
    return np.where(p, t, f).astype(t.dtype), False


def clamp(x, lo, hi):
    return minimum(maximum(x, lo)[0], hi)[0], False


def _analytic(fn):
    def ref(a):
        if a.dtype.kind == "c":
            with np.errstate(all="ignore"):
                return fn(a).astype(a.dtype), False
        return _via_f32(fn, a), False
    return ref


def _rsqrt(x):
    return 1 / np.sqrt(x)


def _log1p(z):
    """numpy's complex log1p is log(|1 + z|) (inaccurate for small z): Re log(1 + z) =
    log1p(x (2 + x) + y^2) / 2 there, computed in double precision."""
    if z.dtype.kind != "c":
        return np.log1p(z)
    w = z.astype(np.complex128)
    x, y = w.real, w.imag
    small = (np.abs(x) < 0.5) & (np.abs(y) < 0.5)
    re = np.where(small, 0.5 * np.log1p(x * (2 + x) + y * y), np.log(np.abs(1 + w)))
    return (re + 1j * np.arctan2(y, 1 + x)).astype(z.dtype)


REF = {
    "add": _arith(lambda x, y: x + y), "sub": _arith(lambda x, y: x - y),
    "mul": _arith(lambda x, y: x * y), "div": div, "rem": rem, "pow": pow_,
    "maximum": maximum, "minimum": minimum, "neg": neg, "conj": conj, "abs": abs_,
    "sign": sign, "select": select, "clamp": clamp,
    "exp": _analytic(np.exp), "log": _analytic(np.log), "sin": _analytic(np.sin),
    "cos": _analytic(np.cos), "tanh": _analytic(np.tanh), "sqrt": _analytic(np.sqrt),
    "rsqrt": _analytic(_rsqrt), "expm1": _analytic(np.expm1), "log1p": _analytic(_log1p),
    **{f"compare_{d.lower()}": compare(d) for d in ("EQ", "NE", "LT", "LE", "GT", "GE")},
    **MORE_REF,
}


# --- comparison -------------------------------------------------------------------------
EXACT = None


def tolerance(op: str, dtype) -> tuple[float, float] | None:
    """(rtol, atol) for ``op`` on ``dtype``; None: bit-exact (NaN matches any NaN)."""
    dt = np.dtype(dtype)
    analytic = op in ("exp", "log", "sin", "cos", "tanh", "rsqrt", "expm1", "log1p", "pow",
                      *TRANSCENDENTAL)
    if dt.kind == "c":
        if op in ("add", "sub", "neg", "conj", "select", "compare", "real", "imag") or \
                op.startswith("compare"):
            return EXACT
        return (2e-5, 1e-6) if dt == np.complex64 else (1e-13, 1e-15)
    if dt.kind != "f" and dt != BF16:
        return EXACT
    if op == "sqrt" or not analytic:
        return EXACT
    return {np.dtype(np.float16): (2e-3, 1e-4), BF16: (1.6e-2, 1e-3),
            np.dtype(np.float32): (4e-6, 1e-7), np.dtype(np.float64): (1e-14, 1e-300)}[dt]


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def mismatch(got: np.ndarray, want: np.ndarray, tol) -> str | None:
    """None when ``got`` matches ``want`` under ``tol``; else a short description."""
    with np.errstate(all="ignore"):
        return _mismatch(got, want, tol)


def _mismatch(got: np.ndarray, want: np.ndarray, tol) -> str | None:
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"shape/dtype {got.shape} {got.dtype} != {want.shape} {want.dtype}"
    if got.dtype.kind == "c":
        parts = [(got.real, want.real), (got.imag, want.imag)]
        if tol is EXACT:
            bad = [_mismatch(g, w, EXACT) for g, w in parts]
            return "; ".join(b for b in bad if b) or None
        mag = np.abs(want.astype(np.complex128))
        for g, w in parts:
            special = ~np.isfinite(w)
            if not np.array_equal(np.isnan(g), np.isnan(w)) or \
                    not np.array_equal(g[special & ~np.isnan(w)], w[special & ~np.isnan(w)]):
                return "non-finite values differ"
        fin = np.isfinite(mag)
        err = np.abs(got.astype(np.complex128) - want.astype(np.complex128))[fin]
        bound = tol[1] + tol[0] * mag[fin]
        return None if np.all(err <= bound) else f"max err {np.max(err - bound):.3g} over bound"
    if got.dtype.kind in "biu":
        bad = got != want
        return None if not bad.any() else f"{bad.sum()} differ, first at {np.argmax(bad.ravel())}"
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    nan_g, nan_w = np.isnan(g64), np.isnan(w64)
    if not np.array_equal(nan_g, nan_w):
        return f"NaN positions differ (got {nan_g.sum()}, want {nan_w.sum()})"
    if tol is EXACT:
        bad = (_bits(got) != _bits(want)) & ~nan_w
        if bad.any():
            i = int(np.argmax(bad.ravel()))
            return f"{bad.sum()} differ; first [{i}] got {got.ravel()[i]} want {want.ravel()[i]}"
        return None
    special = ~np.isfinite(w64) & ~nan_w
    if not np.array_equal(g64[special], w64[special]):
        return "infinities differ"
    fin = np.isfinite(w64)
    with np.errstate(invalid="ignore"):
        err = np.abs(g64 - w64)[fin]
    bound = tol[1] + tol[0] * np.abs(w64[fin])
    if np.all(err <= bound):
        return None
    i = int(np.argmax(err - bound))
    return f"max err {err[i]:.3g} > {bound[i]:.3g} at value {w64[fin][i]}"


# --- inputs -------------------------------------------------------------------------------
POSITIVE = ("log", "sqrt", "rsqrt")


def random_array(rng, dtype, shape, low=None, high=None) -> np.ndarray:
    """Random values of ``dtype``: full range for integers, N(0, 3^2) for floats."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo = info.min if low is None else low
        hi = info.max if high is None else high
        wide = np.uint64 if dt == np.uint64 else np.int64  # uint64's top half is not int64
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=wide).astype(dt)
    if dt.kind == "c":
        real = np.float32 if dt == np.complex64 else np.float64
        return (random_array(rng, real, shape, low, high)
                + 1j * random_array(rng, real, shape, low, high)).astype(dt)
    if low is not None:
        return rng.uniform(low, high, size=shape).astype(dt)
    return (3 * rng.standard_normal(shape)).astype(dt)


def inputs_for(rng, key: str, dtype, shape) -> list[np.ndarray]:
    """Operands of ``key`` (a Kind key) inside its domain (no deferred errors)."""
    dt = np.dtype(dtype)
    if key in MORE_INPUTS:
        return MORE_INPUTS[key](rng, dt, shape)
    if key == "select":
        return [random_array(rng, np.bool_, shape), random_array(rng, dt, shape),
                random_array(rng, dt, shape)]
    if key == "clamp":
        x = random_array(rng, dt, shape)
        lo, hi = random_array(rng, dt, shape), random_array(rng, dt, shape)
        return [x, minimum(lo, hi)[0], maximum(lo, hi)[0]]
    if key in ("div", "rem") and dt.kind in "iu":
        b = random_array(rng, dt, shape)
        return [random_array(rng, dt, shape), np.where(b == 0, 1, b).astype(dt)]
    if key == "pow":
        if dt.kind in "iu":
            lo = 0 if dt.kind == "u" else -4
            return [random_array(rng, dt, shape, lo, 4), random_array(rng, dt, shape, 0, 6)]
        if dt.kind != "c":
            return [random_array(rng, dt, shape, 0.25, 3), random_array(rng, dt, shape, -3, 3)]
    if key in POSITIVE and dt.kind != "c":
        return [random_array(rng, dt, shape, 0.01, 20)]
    if key == "log1p" and dt.kind != "c":
        return [random_array(rng, dt, shape, -0.9, 20)]
    from tenferro_cuda.shapes.elementwise import KINDS
    return [random_array(rng, dt, shape) for _ in range(KINDS[key].arity)]


def specials(dtype) -> np.ndarray:
    """Edge values of ``dtype``: signed zeros, infinities, NaN, extremes, subnormals."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = [0, 1, 2, 7, info.max, info.max - 1, info.min, info.min + 1]
        if dt.kind == "i":
            vals += [-1, -2, -7]
        return np.array(vals, dtype=dt)
    if dt.kind == "c":
        parts = [0.0, -0.0, 1.0, -2.5, 1e-3, 7.0]
        return np.array([complex(r, i) for r in parts for i in parts], dtype=dt)
    fin = ml_dtypes.finfo(dt) if dt == BF16 else np.finfo(dt)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.inf, -np.inf, np.nan, float(fin.max),
            -float(fin.max), float(fin.tiny), float(fin.smallest_subnormal), 1e-3]
    return np.array(vals, dtype=np.float64).astype(dt)


def pairs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of ``values``, as two flat arrays."""
    a, b = np.meshgrid(values, values, indexing="ij")
    return a.reshape(-1), b.reshape(-1)
