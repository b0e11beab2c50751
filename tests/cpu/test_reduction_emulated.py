"""Reductions and BLAS-1 end to end on the CPU: the real op code, planner and argument
packing, with the real kernels of ptx/reduce.cu, ptx/blas1.cu and ptx/copy.cu compiled by
the host C++ compiler against a small emulation of the CUDA built-ins: every thread of a
block is an OS thread, ``__syncthreads`` a block barrier, ``__shfl_xor_sync`` an exchange
behind a per-warp barrier (a lane that misses a shuffle or a barrier aborts the run rather
than hang). Launch parameters go through the real ``ArgPack`` and are unpacked by the
kernel's own parameter types, as ``cuLaunchKernel`` does, so a wrong argument code shows up
as a wrong result. Planner thresholds are lowered so that small inputs take every path
(block groups, split chunks, multi-level partials, flat runs, vector heads and tails).
float16/bfloat16 convert through PTX inline assembly and are covered by the GPU tier.
Skipped when no C++17 compiler is present.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import types

import numpy as np
import pytest

from tenferro_cuda.dtypes import as_dtype
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.kernels.registry import INCLUDE_DIR, PTX_DIR, family
from tenferro_cuda.ops import blas1 as blas1_ops
from tenferro_cuda.ops import reduction as reduction_ops
from tenferro_cuda.ops import transfer
from tenferro_cuda.ops.blas1 import Blas1Ops
from tenferro_cuda.ops.reduction import ReductionOps
from tenferro_cuda.ops.transfer import TransferOps
from tenferro_cuda.shapes import reduction_plan
from tenferro_cuda.shapes.reduction_plan import Machine
from tenferro_cuda.tensor import Tensor, _Strided

SHIM = r"""
#pragma once
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
using std::isinf;
struct emu_dim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;
struct EmuBarrier {  // reusable; aborts instead of hanging
  std::mutex mu; std::condition_variable cv; unsigned n = 0, waiting = 0, gen = 0;
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    unsigned g = gen;
    if (++waiting == n) { waiting = 0; ++gen; cv.notify_all(); return; }
    if (!cv.wait_for(lk, std::chrono::seconds(30), [&] { return gen != g; })) {
      std::fprintf(stderr, "emulated barrier timed out\n"); std::abort();
    }
  }
};
inline EmuBarrier emu_block, emu_warp[32];
inline unsigned char emu_xchg[1024][16];
inline void __syncthreads() { emu_block.wait(); }
template <class T> T __shfl_xor_sync(unsigned, T v, int m) {
  unsigned t = threadIdx.x + threadIdx.y * blockDim.x;
  std::memcpy(emu_xchg[t], &v, sizeof(T));
  emu_warp[t / 32].wait();
  T r;
  std::memcpy(&r, emu_xchg[(t & ~31u) | ((t & 31u) ^ (unsigned)m)], sizeof(T));
  emu_warp[t / 32].wait();
  return r;
}
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, 8); return d; }
inline float __double2float_rz(double d) { return (float)d; }  // (rounding mode unused here)
inline float __ll2float_rz(long long v) { return (float)v; }
inline long long __float2ll_rz(float f) { return (long long)f; }
inline int atomicCAS(int* p, int c, int v) {
  return __atomic_compare_exchange_n(p, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST), c;
}
template <class F> void emu_launch(unsigned gx, unsigned gy, unsigned bx, unsigned by, F k) {
  gridDim = {gx, gy, 1};
  blockDim = {bx, by, 1};
  const unsigned nt = bx * by;
  emu_block.n = nt;
  for (unsigned w = 0; w * 32 < nt; ++w) emu_warp[w].n = std::min(32u, nt - 32 * w);
  std::vector<std::thread> th;
  for (unsigned t = 0; t < nt; ++t)
    th.emplace_back([&, t] {
      threadIdx = {t % bx, t / bx, 0};
      for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x) {
          blockIdx = {x, y, 0};
          k();
          emu_block.wait();
        }
    });
  for (auto& x : th) x.join();
}
template <class... P, std::size_t... I>
void emu_call(void (*k)(P...), void** a, std::index_sequence<I...>) {
  k(*reinterpret_cast<std::remove_reference_t<P>*>(a[I])...);
}
template <class... P> void emu_call(void (*k)(P...), void** a) {
  emu_call(k, a, std::index_sequence_for<P...>{});
}
"""
LOWP = ("tf::half", "tf::bfloat16")


def _expressions() -> list[str]:
    out = []
    for name in ("reduce", "blas1", "copy"):
        out += [e for e in family(name).all_expressions()
                if not e.endswith(", tf::u64>") and not any(t in e for t in LOWP)]
    return out


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler for the kernel emulation")
    d = tmp_path_factory.mktemp("emu")
    (d / "shim.h").write_text(SHIM)
    exprs = _expressions()
    lines = ['#include "shim.h"', '#include "reduce.cu"', '#include "blas1.cu"',
             '#include "copy.cu"']
    for i, e in enumerate(exprs):
        lines.append(f'extern "C" void w{i}(void** a, unsigned gx, unsigned gy, unsigned bx, '
                     f"unsigned by) {{ emu_launch(gx, gy, bx, by, [&] {{ emu_call(&{e}, a); "
                     "}); }")
    (d / "emu.cpp").write_text("\n".join(lines))
    out = d / "libemu.so"
    proc = subprocess.run([cxx, "-std=c++17", "-pthread", "-O1", "-shared", "-fPIC",
                           "-w", f"-I{d}", f"-I{INCLUDE_DIR}", f"-I{PTX_DIR}",
                           str(d / "emu.cpp"), "-o", str(out)], capture_output=True, text=True)
    if proc.returncode and "unrecognized" in proc.stderr:
        pytest.skip(f"{cxx} cannot build the emulation: {proc.stderr[:200]}")
    assert proc.returncode == 0, proc.stderr[-4000:]
    return ctypes.CDLL(str(out)), {e: f"w{i}" for i, e in enumerate(exprs)}


class _Buf:
    def __init__(self, nbytes: int) -> None:
        self.raw = np.zeros(nbytes + 272, np.uint8)
        self.ptr = (self.raw.ctypes.data + 255) // 256 * 256  # pool allocations: 256-aligned
        self.nbytes, self.freed = nbytes, False


class EmuSession(ReductionOps, Blas1Ops, TransferOps):
    """The reduction and BLAS-1 mixins over host memory; launches run emulated kernels."""

    def __init__(self, lib, index) -> None:
        self.lib, self.index, self.launched = lib, index, []
        self._state = types.SimpleNamespace(stream=None, prepared={})
        self._rt = types.SimpleNamespace(identity=types.SimpleNamespace(serial=-1),
                                         info=types.SimpleNamespace(multiprocessor_count=2))

    def _begin(self, op):
        return self._state

    def _resident(self, t, op, what="input"):
        if not isinstance(t, _Strided):
            raise ValidationError(f"{what} is not a tensor", op=op)

    def _alloc(self, dtype, shape, op):
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return Tensor._make(dtype, tuple(shape), buffer=_Buf(nbytes))

    def _fn(self, family, expression):
        return expression

    def _machine(self, kind, dtype, path):
        return Machine(3, 3) if path == "rows" else Machine(2, 2)

    def _launch(self, fn, grid, block, params, op, shared=0):
        assert grid[2] == block[2] == 1 and block[0] * block[1] <= 256
        f = getattr(self.lib, self.index[fn])
        f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 4
        f(params, grid[0], grid[1], block[0], block[1])
        self.launched.append(fn.split("<")[0])

    def _launch1d(self, fn, blocks, params, op, block=256):
        self._launch(fn, (blocks, 1, 1), (block, 1, 1), params, op)

    def up(self, a: np.ndarray, shift: int = 0) -> Tensor:
        """Upload; ``shift`` bytes past the 256-byte boundary (an adopted foreign buffer)."""
        a = np.array(a, order="C")  # (ascontiguousarray would make rank 0 rank 1)
        t = self._alloc(as_dtype(a.dtype), a.shape, "up")
        t.buffer.ptr += shift
        ctypes.memmove(t.buffer.ptr, a.ctypes.data, a.nbytes)
        return t

    def down(self, t) -> np.ndarray:
        assert isinstance(t, Tensor)
        raw = (ctypes.c_uint8 * max(t.nbytes, 1)).from_address(t.buffer.ptr)
        flat = np.frombuffer(raw, np.uint8, t.nbytes).view(t.dtype.numpy).copy()
        return flat.reshape(t.shape)


@pytest.fixture(scope="module")
def s(lib):
    fake = types.SimpleNamespace(
        memcpy_dtod_async=lambda d, s, n, stream, op="": ctypes.memmove(d, s, n),
        memset_d8_async=lambda d, v, n, stream, op="": ctypes.memset(d, v, n))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(transfer, "_driver", fake)
        mp.setattr(blas1_ops, "resident_blocks", lambda s, f, e: 3)
        mp.setattr(blas1_ops, "MIN_FLAT_CHUNK", 64)
        for name, value in [("MIN_CHUNK", 64), ("BLOCK_GROUP_MIN", 48), ("MIN_ROWS", 4)]:
            mp.setattr(reduction_plan, name, value)
        reduction_ops._plans.clear()
        reduction_ops._calls.clear()
        yield EmuSession(*lib)
        reduction_ops._plans.clear()
        reduction_ops._calls.clear()


# --- reductions ---------------------------------------------------------------------------
DTYPES = ["int8", "uint8", "int32", "int64", "float32", "float64", "complex64", "complex128"]
KINDS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}


def sample(dt: str, shape, kind: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = np.dtype(dt)
    if d.kind in "iu":
        lo, hi = (-3, 4) if kind == "prod" else (-100, 100)
        return rng.integers(max(lo, np.iinfo(d).min), hi, shape).astype(d)
    scale = 0.05 if kind == "prod" else 1.0
    a = 1 + scale * rng.standard_normal(shape) if kind == "prod" else rng.standard_normal(shape)
    if d.kind == "c":
        a = a + 1j * scale * rng.standard_normal(shape)
    return a.astype(d)


def reference(kind: str, a: np.ndarray, axes) -> np.ndarray:
    if a.dtype.kind in "iu":
        return KINDS[kind](a, axis=tuple(axes), dtype=a.dtype) if kind in ("sum", "prod") \
            else KINDS[kind](a, axis=tuple(axes))
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    return KINDS[kind](a.astype(wide), axis=tuple(axes)).astype(a.dtype)


def close(got: np.ndarray, ref: np.ndarray, scale) -> None:
    """Integers exactly; floats within 8 eps of ``scale`` (the error scale per element)."""
    assert got.shape == ref.shape and got.dtype == ref.dtype
    if got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, ref)
        return
    eps = np.finfo(got.dtype).eps
    bad = ~(np.abs(got.astype(np.complex128) - ref) <= 8 * eps * np.asarray(scale))
    bad &= ~(np.isnan(got) & np.isnan(ref))
    assert not bad.any(), f"got {got[bad][:5]}, want {ref[bad][:5]}"


def check(kind: str, got: np.ndarray, v: np.ndarray, axes) -> None:
    ref = reference(kind, v, axes)
    if kind in ("max", "min"):
        np.testing.assert_array_equal(got, ref)
    elif kind == "sum":
        close(got, ref, np.sum(np.abs(v.astype(np.complex128)), axis=tuple(axes)) + 1e-30)
    else:
        n = int(np.prod([v.shape[i] for i in axes]))
        close(got, ref, np.abs(ref) * np.sqrt(n) + 1e-30)


# (shape, view(a) -> view, axes): rows, cols, flat runs, block groups, splits, views
CASES = {
    "all_1d": ((3001,), lambda a: a, (0,)),
    "rows_long": ((7, 1003), lambda a: a, (1,)),
    "rows_many": ((300, 37), lambda a: a, (1,)),
    "rows_short": ((500, 3), lambda a: a, (1,)),
    "cols": ((517, 24), lambda a: a, (0,)),
    "cols_odd": ((301, 5), lambda a: a, (0,)),
    "middle": ((6, 41, 8), lambda a: a, (1,)),
    "outer_inner": ((9, 5, 23), lambda a: a, (0, 2)),
    "flat_runs": ((200, 3, 3), lambda a: a, (0, 2)),
    "all_3d": ((13, 11, 7), lambda a: a, (0, 1, 2)),
    "transposed": ((40, 33), lambda a: a.T, (0,)),
    "transposed_rows": ((40, 33), lambda a: a.T, (1,)),
    "negative": ((29, 31), lambda a: a[::-1, ::-2], (1,)),
    "negative_cols": ((29, 31), lambda a: a[::-3, ::-1], (0,)),
    "sliced_offset": ((12, 50, 4), lambda a: a[3:, 7:41, 1:], (1,)),
    "no_unit_stride": ((20, 30), lambda a: a[::2, ::3], (1,)),
    "rank6": ((2, 3, 1, 4, 5, 3), lambda a: a.transpose(5, 1, 0, 3, 2, 4), (0, 3, 4)),
    "extent1_axes": ((1, 9, 1), lambda a: a, (0, 2)),
    "no_axes": ((4, 5), lambda a: a.T, ()),
}


def _device_view(s, a: np.ndarray, make):
    t = s.up(a)
    v = make(a)
    base = a.__array_interface__["data"][0]
    off = (v.__array_interface__["data"][0] - base) // a.itemsize
    strides = [st // a.itemsize for st in v.strides]
    return (t if v is a else t.view(v.shape, strides, off)), v


def _ops(dt):
    return [k for k in KINDS if not (k in ("max", "min") and np.dtype(dt).kind == "c")]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dt", DTYPES)
def test_reductions_match_numpy(s, dt, case):
    shape, make, axes = CASES[case]
    for kind in _ops(dt):
        a = sample(dt, shape, kind)
        t, v = _device_view(s, a, make)
        check(kind, s.down(getattr(s, f"reduce_{kind}_read")(t, axes)), v, axes)


def test_every_path_is_taken(s):
    s.launched.clear()
    for case in ("all_1d", "cols", "flat_runs", "rows_short", "no_axes"):
        shape, make, axes = CASES[case]
        t, _ = _device_view(s, sample("float32", shape, "sum"), make)
        s.reduce_sum(t, axes)
    assert {"tf::reduce_rows", "tf::reduce_cols", "tf::strided_copy"} <= set(s.launched)


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("case", ["rows_long", "cols", "all_3d"])
def test_nan_propagates(s, kind, case):
    shape, make, axes = CASES[case]
    a = sample("float32", shape, kind)
    a.reshape(-1)[a.size // 3] = np.nan
    t, v = _device_view(s, a, make)
    got = s.down(getattr(s, f"reduce_{kind}")(t, axes))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(KINDS[kind](v, axis=axes)))


def test_empty_reductions_fill_identities(s):
    z = s.up(np.zeros((3, 0, 2), np.float32))
    np.testing.assert_array_equal(s.down(s.reduce_sum(z, (1,))), np.zeros((3, 2)))
    np.testing.assert_array_equal(s.down(s.reduce_prod(z, (1,))), np.ones((3, 2)))
    assert s.down(s.reduce_max(z, (0,))).shape == (0, 2)


def test_cached_calls_still_validate(s):
    t = s.up(np.ones((3, 4), np.float32))
    s.reduce_sum(t, (1,))
    s.reduce_sum(t, (1,))  # served from the call cache
    for bad in ((True,), (np.int64(1), 1), [1, 1]):
        with pytest.raises(ValidationError):
            s.reduce_sum(t, bad)
    np.testing.assert_array_equal(s.down(s.reduce_sum(t, [np.int64(1)])), np.full(3, 4.0))


def test_same_bits_every_run(s):
    a = sample("float32", (5, 4099), "sum", 3)
    t = s.up(a)
    runs = [s.down(s.reduce_sum(t, ax)).tobytes() for ax in ((1,), (0, 1), (0,))
            for _ in range(3)]
    assert runs[0] == runs[1] == runs[2] and runs[3] == runs[4] == runs[5]
    assert runs[6] == runs[7] == runs[8]


@pytest.mark.parametrize("dt", ["int8", "float32", "complex64"])
def test_unaligned_buffers(s, dt):
    a = sample(dt, (37, 24), "sum", 8)
    t = s.up(a, shift=np.dtype(dt).itemsize)
    for axes in ((0,), (1,), (0, 1)):
        check("sum", s.down(s.reduce_sum(t, axes)), a, axes)
    wa = a.astype(_wide(dt))
    close(s.down(s.vdot_read(t, t)), np.asarray(np.sum(np.conj(wa) * wa)).astype(dt),
          np.sum(np.abs(wa) ** 2))
    y = s.up(a, shift=np.dtype(dt).itemsize)
    s.axpby_read_into_accum(2, t, 1, y)
    close(s.down(y), (3 * wa).astype(dt), np.abs(3 * wa))


# --- BLAS-1 -------------------------------------------------------------------------------
def _wide(dt):
    return {"i": np.int64, "u": np.int64, "f": np.float64}.get(np.dtype(dt).kind, np.complex128)


@pytest.mark.parametrize("size", [0, 1, 37, 5000])
@pytest.mark.parametrize("dt", DTYPES)
def test_vdot_and_norm_squared(s, dt, size):
    a, b = sample(dt, (size,), "sum", 1), sample(dt, (size,), "sum", 2)
    wa, wb = a.astype(_wide(dt)), b.astype(_wide(dt))
    real = np.dtype(np.dtype(dt).type(0).real.dtype)
    dot = np.sum(np.conj(wa) * wb)
    close(s.down(s.vdot_read(s.up(a), s.up(b))), np.asarray(dot).astype(dt),
          np.sum(np.abs(wa * wb)) + 1e-30)
    n2 = np.sum((wa * np.conj(wa)).real)
    close(s.down(s.norm_squared_read(s.up(a))), np.asarray(n2).astype(real), n2 + 1e-30)


@pytest.mark.parametrize("dt", DTYPES)
def test_vdot_of_views(s, dt):
    a = sample(dt, (30, 41), "sum", 4)
    ta = s.up(a)
    x, y = a[::2, 1:].astype(_wide(dt)), a.T[1:, ::2].T.astype(_wide(dt))
    got = s.down(s.vdot_read(ta[::2, 1:], ta.T[1:, ::2].T))
    close(got, np.asarray(np.sum(np.conj(x) * y)).astype(dt), np.sum(np.abs(x * y)))


@pytest.mark.parametrize("beta", [0, 2])
@pytest.mark.parametrize("dt", DTYPES)
def test_axpby(s, dt, beta):
    x, y = sample(dt, (9, 70), "sum", 5), sample(dt, (9, 70), "sum", 6)
    if beta == 0 and np.dtype(dt).kind not in "iu":
        y[0, 0] = np.nan  # not read when beta == 0
    wx, wy = x.astype(_wide(dt)), y.astype(_wide(dt))
    ty = s.up(y)
    s.axpby_read_into_accum(3, s.up(x), beta, ty)
    ref = 3 * wx + (beta * wy if beta else 0)
    close(s.down(ty), ref.astype(dt), np.abs(3 * wx) + (np.abs(beta * wy) if beta else 0))
    ty2 = s.up(y)
    s.axpby_read_into_accum(2, s.up(x).T[::-1].T, 1, ty2.T[::-1].T)  # strided views
    close(s.down(ty2), (2 * wx + wy).astype(dt), np.abs(2 * wx) + np.abs(wy) + 1e-30)
