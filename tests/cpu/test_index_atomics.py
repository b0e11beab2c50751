"""The atomic combiners of ptx/include/tenferro/index.cuh (what scatter applies per update)
compiled by the host C++ compiler against tests/reference/cuda_emu.py and applied to
updates with many collisions, neighbours sharing one 32-bit word (the 8- and 16-bit
types go through a CAS on that word) and the extremes of every integer dtype, against a
sequential numpy reference: add wraps, max/min compare as signed or unsigned per dtype,
float max/min propagate NaN and put +0 above -0. float16/bfloat16 convert through PTX and
are left to the GPU tier. Skipped when no host C++ compiler is present."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from reference import cuda_emu

from tenferro_cuda.dtypes import DType

D = DType
TYPES = [D.INT8, D.UINT8, D.INT16, D.UINT16, D.INT32, D.UINT32, D.INT64, D.UINT64,
         D.FLOAT32, D.FLOAT64, D.COMPLEX64, D.COMPLEX128]
OPS = ("add", "max", "min")
# the device atomics the helpers call, one update at a time (a fiber never interleaves)
ATOMICS = r"""
template <class T> T emu_atomic_rmw(T* p, T v, int how) {
  T old = *p;
  *p = how == 0 ? (T)(old + v) : how == 1 ? (old > v ? old : v) : (old < v ? old : v);
  return old;
}
inline float atomicAdd(float* p, float v) { return emu_atomic_rmw(p, v, 0); }
inline double atomicAdd(double* p, double v) { return emu_atomic_rmw(p, v, 0); }
inline int atomicAdd(int* p, int v) { return emu_atomic_rmw(p, v, 0); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return emu_atomic_rmw(p, v, 0); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return emu_atomic_rmw(p, v, 0);
}
inline int atomicMax(int* p, int v) { return emu_atomic_rmw(p, v, 1); }
inline int atomicMin(int* p, int v) { return emu_atomic_rmw(p, v, 2); }
inline long long atomicMax(long long* p, long long v) { return emu_atomic_rmw(p, v, 1); }
inline long long atomicMin(long long* p, long long v) { return emu_atomic_rmw(p, v, 2); }
inline unsigned atomicMax(unsigned* p, unsigned v) { return emu_atomic_rmw(p, v, 1); }
inline unsigned atomicMin(unsigned* p, unsigned v) { return emu_atomic_rmw(p, v, 2); }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  return emu_atomic_rmw(p, v, 1);
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  return emu_atomic_rmw(p, v, 2);
}
inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) {
  unsigned old = *p; if (old == c) *p = v; return old;
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c,
                                    unsigned long long v) {
  unsigned long long old = *p; if (old == c) *p = v; return old;
}
template <class T> T __ldg(const T* p) { return *p; }
"""


def _wrappers() -> str:
    lines = ['#include "shim.h"', '#include "tenferro/index.cuh"', "using namespace tf;"]
    for d, op in CASES:
        lines.append(
            f'extern "C" void {op}_{d.value}(void* out, const long long* at, '
            f"const void* v, long n) {{ for (long i = 0; i < n; ++i) atomic_{op}("
            f"({d.ctype}*)out + at[i], (({d.ctype} const*)v)[i]); }}")
    return "\n".join(lines)


def _build_args() -> dict:
    return dict(name="index_atomics", wrappers=_wrappers(), shim_extra=ATOMICS,
                optimize="-O0")


cuda_emu.ahead(__name__, _build_args)


@pytest.fixture(scope="module")
def lib():
    return cuda_emu.build(**_build_args())


def _values(rng, d: DType, n: int) -> np.ndarray:
    dt = d.numpy
    if d.is_integer:
        info = np.iinfo(dt)
        edges = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1], dt)
        wide = np.uint64 if dt == np.uint64 else np.int64
        rand = rng.integers(info.min, info.max, n, endpoint=True, dtype=wide).astype(dt)
        return np.concatenate([edges, rand])[:n]
    if d.is_complex:
        return (rng.integers(-50, 50, n) + 1j * rng.integers(-50, 50, n)).astype(dt)
    # one NaN (it takes its slot for good), infinities, and many signed zeros: ties of
    # +0 and -0 in every other slot
    out = rng.integers(-3, 3, n).astype(dt)
    out[rng.random(n) < 0.3] = -0.0
    out[:4] = [np.nan, np.inf, -np.inf, 1.5]
    return out


def _combine(op: str, a, b):
    """One update of the reference (NaN wins; +0 above -0; integers as their dtype)."""
    if op == "add":
        with np.errstate(over="ignore"):
            return a + b
    if isinstance(a, np.floating):
        if np.isnan(a):
            return a
        if np.isnan(b):
            return b
        if a == b:
            pick_a = np.signbit(b) if op == "max" else np.signbit(a)
            return a if pick_a else b
    return (max if op == "max" else min)(a, b)


CASES = [(d, op) for d in TYPES for op in OPS if op == "add" or not d.is_complex]


@pytest.mark.parametrize("dtype,op", CASES, ids=[f"{d.value}-{op}" for d, op in CASES])
def test_atomic_combiners_match_a_sequential_reference(lib, dtype, op):
    rng = np.random.default_rng(11)
    slots, n = 13, 600  # 13 neighbours: subword updates share words with both sides
    at = rng.integers(0, slots, n).astype(np.int64)
    vals = _values(rng, dtype, n)
    start = _values(np.random.default_rng(12), dtype, slots)
    got = np.concatenate([start, np.zeros(3, dtype.numpy)])  # a word past the last slot
    want = start.copy()
    for i, v in zip(at, vals):
        want[i] = _combine(op, want[i], v)
    getattr(lib, f"{op}_{dtype.value}")(
        got.ctypes.data_as(ctypes.c_void_p), at.ctypes.data_as(ctypes.c_void_p),
        vals.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(n))
    assert (got[slots:] == 0).all(), "a neighbour past the last slot was written"
    bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}
    view = bits[dtype.itemsize]
    np.testing.assert_array_equal(got[:slots].view(view), want.view(view))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("dtype", [D.FLOAT32, D.FLOAT64], ids=lambda d: d.value)
def test_signed_zeros_combine_whatever_the_order(lib, dtype, op):
    """max(+0, -0) is +0 and min(+0, -0) is -0 in either order, so the result does not
    depend on which update lands first."""
    dt = dtype.numpy
    start = np.array([0.0, -0.0, 0.0, -0.0], dt)
    vals = np.array([-0.0, 0.0, 0.0, -0.0], dt)
    got, at = start.copy(), np.arange(4, dtype=np.int64)
    getattr(lib, f"{op}_{dtype.value}")(
        got.ctypes.data_as(ctypes.c_void_p), at.ctypes.data_as(ctypes.c_void_p),
        vals.ctypes.data_as(ctypes.c_void_p), ctypes.c_long(4))
    pairs = zip(np.signbit(start), np.signbit(vals))
    negative = [bool(a and b) if op == "max" else bool(a or b) for a, b in pairs]
    assert (got == 0).all() and list(np.signbit(got)) == negative
