"""Host emulation of the reduction and BLAS-1 kernels, shared by test_reduction_emulated*.py.

The real kernels of ptx/reduce.cu, ptx/blas1.cu, ptx/copy.cu and ptx/permute.cu (the
storage copies) are compiled by the host C++ compiler against the emulation of the CUDA
built-ins of ``tests/reference/cuda_emu.py`` (every thread of a block a fiber, barriers
that abort rather than hang), with ``__shfl_xor_sync`` an exchange behind a per-warp
barrier. ``EmuSession`` runs the real reduction and BLAS-1 family functions (their
``METHODS`` tables) over an ``EmuContext``: ``tests/reference/fake_context.FakeContext``
on ``HostMemory``, whose launches pack their parameters with the real ``ArgPack`` from
the argument codes the op gave, unpacked by the kernel's own parameter types, as
``cuLaunchKernel`` does, so a wrong argument code is a wrong result. float16/bfloat16
convert through PTX inline assembly and are left to the GPU tier.
"""

from __future__ import annotations

import contextlib
import ctypes

import numpy as np
import pytest
from reference import cuda_emu
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda.dtypes import as_dtype
from tenferro_cuda.kernels.args import ArgPack
from tenferro_cuda.kernels.launch import check_geometry
from tenferro_cuda.kernels.registry import family
from tenferro_cuda.ops import blas1 as blas1_ops
from tenferro_cuda.ops import reduction as reduction_ops
from tenferro_cuda.ops.reduction import plan as reduction_plan_ops
from tenferro_cuda.shapes import reduction_plan
from tenferro_cuda.shapes.reduction_plan import Machine
from tenferro_cuda.tensor import Tensor

SHIM = r"""
template <class T> T __shfl_xor_sync(unsigned, T v, int m) {
  unsigned t = threadIdx.x + threadIdx.y * blockDim.x;
  std::memcpy(emu_xchg[t], &v, sizeof(T));
  emu_warp[t / 32].wait();
  T r;
  std::memcpy(&r, emu_xchg[(t & ~31u) | ((t & 31u) ^ (unsigned)m)], sizeof(T));
  emu_warp[t / 32].wait();
  return r;
}
"""
LOWP = ("tf::half", "tf::bfloat16")
FAMILIES = ("reduce", "blas1", "copy", "permute")


def _expressions(names) -> list[str]:
    out = []
    for name in names:
        out += [e for e in family(name).all_expressions()
                if not e.endswith(", tf::u64>") and not any(t in e for t in LOWP)]
    return out


def build_args(names=FAMILIES, shim_extra: str = "") -> dict:
    """``cuda_emu.build``'s arguments for the kernels of the families ``names`` (the u32
    instantiations without float16/bfloat16). ``shim_extra``: more emulated built-ins."""
    exprs = _expressions(names)
    sources = tuple(family(n).source for n in names)
    lines = ['#include "shim.h"'] + [f'#include "{src}"' for src in sources]
    for i, e in enumerate(exprs):
        lines.append(f'extern "C" void w{i}(void** a, unsigned gx, unsigned gy, unsigned bx, '
                     f"unsigned by) {{ emu_launch(gx, gy, 1, bx, by, [&] {{ "
                     f"emu_call(&{e}, a); }}); }}")
    return dict(name="reduction_emu", wrappers="\n".join(lines), shim_extra=SHIM + shim_extra,
                sources=sources, optimize="-O0")


def build(names=FAMILIES, shim_extra: str = ""):
    """(library, expression -> symbol) of ``build_args(names, shim_extra)``."""
    lib = cuda_emu.build(**build_args(names, shim_extra))
    return lib, {e: f"w{i}" for i, e in enumerate(_expressions(names))}


def session_fixture(module: str, args=None, make=None, open_session=None):
    """The module-scoped fixture ``s`` of test module ``module``: an EmuSession over the
    emulation library (``build_args``/``build``/``session`` unless others are given),
    whose build is declared ahead (``cuda_emu.ahead``)."""
    cuda_emu.ahead(module, args or build_args)

    @pytest.fixture(scope="module")
    def s():
        with (open_session or session)((make or build)()) as emu_session:
            yield emu_session

    return s


class _EmuLaunch:
    """A prepared launch of the emulation: ``run``/``run3`` pack head + tail with the
    kernel's argument codes and run the emulated kernel."""

    def __init__(self, ctx: EmuContext, fn: str, codes: str, block, shared: int, tail,
                 op: str) -> None:
        self.ctx, self.fn, self.block, self.shared, self.op = ctx, fn, tuple(block), shared, op
        self.pack, self.tail = ArgPack(codes), tuple(tail)

    def run(self, gx: int, *head) -> None:
        self.run3((gx, 1, 1), *head)

    def run3(self, grid, *head) -> None:
        self.ctx.run(self.fn, tuple(grid), self.block, self.shared,
                     self.pack.pack(*head, *self.tail), self.op)


class EmuContext(FakeContext):
    """FakeContext over HostMemory whose launches run the emulated kernels (``lib`` None:
    launches are only recorded, for tests that must launch nothing)."""

    def __init__(self, lib=None, index=None, **info) -> None:
        super().__init__(HostMemory(), None, **info)
        self.lib, self.index = lib, index or {}
        self.launched: list[str] = []

    def prepare(self, key, fn, codes, *, block=(256, 1, 1), shared=0, tail=(), op=""):
        return _EmuLaunch(self, fn, codes, block, shared, tail, op)

    def launch(self, fn, codes, grid, args, op, block=(256, 1, 1), shared=0) -> None:
        _EmuLaunch(self, fn, codes, block, shared, (), op).run3(grid, *args)

    def run(self, fn: str, grid, block, shared: int, params: int, op: str) -> None:
        check_geometry(self.info, grid, block, shared, op)
        assert grid[2] == block[2] == 1 and block[0] * block[1] <= 256 and shared == 0
        self.launched.append(fn.split("<")[0])
        if self.lib is None:
            return
        f = getattr(self.lib, self.index[fn])
        f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 4
        f(params, grid[0], grid[1], block[0], block[1])


class EmuSession(FakeSession):
    """The reduction and BLAS-1 functions bound to an EmuContext, with uploads and
    downloads over its host memory."""

    def __init__(self, lib=None, index=None) -> None:
        super().__init__(EmuContext(lib, index), reduction_ops.METHODS, blas1_ops.METHODS)
        self.launched = self.ctx.launched

    def up(self, a: np.ndarray, shift: int = 0) -> Tensor:
        """Upload; ``shift`` bytes past the 256-byte boundary (an adopted foreign buffer)."""
        a = np.array(a, order="C")  # (ascontiguousarray would make rank 0 rank 1)
        t = self.ctx.alloc(as_dtype(a.dtype), a.shape, "up")
        t.buffer.ptr += shift
        ctypes.memmove(t.buffer.ptr, a.ctypes.data, a.nbytes)
        return t

    def down(self, t) -> np.ndarray:
        assert isinstance(t, Tensor)
        raw = (ctypes.c_uint8 * max(t.nbytes, 1)).from_address(t.buffer.ptr)
        return np.frombuffer(raw, np.uint8, t.nbytes).view(t.dtype.numpy).copy().reshape(t.shape)


def _machine(ctx, kind, dtype, path):
    return Machine(3, 3) if path == "rows" else Machine(2, 2)


def _clear() -> None:
    for cache in (reduction_plan_ops._plans, reduction_plan_ops._occupancy,
                  reduction_ops._calls):
        cache.clear()


@contextlib.contextmanager
def session(lib=(None, None)):
    """An EmuSession with the planner thresholds and occupancy lowered, so that small
    inputs take every path (block groups, split chunks, multi-level partials, flat runs,
    vector heads and tails). ``lib``: what ``build`` returns (default: record only)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reduction_plan_ops, "machine", _machine)
        mp.setattr(blas1_ops, "resident_blocks", lambda ctx, f, e: 3)
        mp.setattr(blas1_ops, "MIN_FLAT_CHUNK", 64)
        for name, value in [("MIN_CHUNK", 64), ("BLOCK_GROUP_MIN", 48), ("MIN_ROWS", 4)]:
            mp.setattr(reduction_plan, name, value)
        _clear()
        try:
            yield EmuSession(*lib)
        finally:
            _clear()


# --- data and comparisons -------------------------------------------------------------
DTYPES = ["int8", "uint8", "int32", "int64", "float32", "float64", "complex64", "complex128"]


def wide(dt):
    return {"i": np.int64, "u": np.int64, "f": np.float64}.get(np.dtype(dt).kind, np.complex128)


def sample(dt: str, shape, kind: str = "sum", seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = np.dtype(dt)
    if kind in ("and", "or"):  # mostly set (and) / mostly clear (or) bits: mixed results
        p = 0.97 if kind == "and" else 0.03
        bits = rng.random((*np.shape(np.empty(shape)), 8 * d.itemsize)) < p
        if d.kind == "b":
            return np.ascontiguousarray(bits[..., 0])
        weights = np.array([1 << i for i in range(8 * d.itemsize)], np.uint64)
        words = (bits.astype(np.uint64) * weights).sum(axis=-1, dtype=np.uint64)
        return words.astype(np.dtype(f"u{d.itemsize}")).view(d)
    if d.kind in "iu":
        lo, hi = (-3, 4) if kind == "prod" else (-100, 100)
        return rng.integers(max(lo, np.iinfo(d).min), hi, shape).astype(d)
    scale = 0.05 if kind == "prod" else 1.0
    a = 1 + scale * rng.standard_normal(shape) if kind == "prod" else rng.standard_normal(shape)
    if d.kind == "c":
        a = a + 1j * scale * rng.standard_normal(shape)
    return a.astype(d)


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


def bit_reduce(kind: str):
    """numpy's and/or reduction: logical on bool, bitwise on integers."""
    def reduce(v: np.ndarray, axis=None) -> np.ndarray:
        if v.dtype.kind == "b":
            return (np.all if kind == "and" else np.any)(v, axis=axis)
        return (np.bitwise_and if kind == "and" else np.bitwise_or).reduce(v, axis=axis)
    return reduce


KINDS = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
         "and": bit_reduce("and"), "or": bit_reduce("or")}
BIT_DTYPES = ["bool", "int8", "uint8", "int32", "int64"]


def check(kind: str, got: np.ndarray, v: np.ndarray, axes) -> None:
    """``got`` against numpy: integers wrapped in their dtype, max/min and and/or exactly."""
    axes = tuple(axes)
    if kind in ("and", "or"):
        ref = np.asarray(KINDS[kind](v, axis=axes))
        assert got.dtype == v.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
        return
    if v.dtype.kind in "iu":
        extra = {"dtype": v.dtype} if kind in ("sum", "prod") else {}
        np.testing.assert_array_equal(got, KINDS[kind](v, axis=axes, **extra))
        return
    ref = KINDS[kind](v.astype(wide(v.dtype)), axis=axes).astype(v.dtype)
    if kind in ("max", "min"):
        np.testing.assert_array_equal(got, ref)
    elif kind == "sum":
        close(got, ref, np.sum(np.abs(v.astype(np.complex128)), axis=axes) + 1e-30)
    else:
        n = int(np.prod([v.shape[i] for i in axes]))
        close(got, ref, np.abs(ref) * np.sqrt(n) + 1e-30)
