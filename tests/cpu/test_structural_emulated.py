"""The structural ops end to end on the CPU: the real planner and op code, with the real
kernels of ptx/permute.cu and ptx/structural.cu compiled by the host C++ compiler against the
emulation of the CUDA built-ins of ``tests/reference/cuda_emu.py`` (each CUDA thread of a
block a fiber, blocks one after another). Memory is host memory and "device pointers" are
host addresses, so alignment, vector paths, shared-memory swizzles and barriers are
exercised exactly as written. Skipped when no host C++ compiler is present.
"""

from __future__ import annotations

import ctypes
import itertools
import re

import ml_dtypes
import numpy as np
import pytest
from reference import cuda_emu
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda.dtypes import as_dtype
from tenferro_cuda.kernels.families.permute import ROW_VECTORS, STORAGE, TILE
from tenferro_cuda.ops import structural
from tenferro_cuda.tensor import Tensor

SIZE = {v: k for k, v in STORAGE.items()}


def _wrappers() -> str:
    lines = ['#include "shim.h"', '#include "permute.cu"', '#include "structural.cu"',
             "using namespace tf;"]
    sig = "(void* d, const void* x, const void* p, unsigned gx, unsigned gy)"
    for size, st in STORAGE.items():
        for i in ("u32", "u64"):
            body = []
            for v in ROW_VECTORS[size]:
                body.append((f"rows_{size}_{v}_{i}", f"RowPlan<{i}>",
                             f"permute_rows<{st}, {v}, {i}>"))
            v, t = TILE[size]
            body.append((f"tiled_{size}_{i}", f"TilePlan<{i}>",
                         f"permute_tiled<{st}, {v}, {t}, {i}>"))
            body.append((f"tri_{size}_{i}", f"TriPlan<{i}>", f"tri_copy<{st}, {i}>"))
            for name, plan, kern in body:
                lines.append(f'extern "C" void {name}{sig} {{ {plan} pl; '
                             "std::memcpy(&pl, p, sizeof pl); "
                             f"emu_launch(gx, gy, 1, 256, 1, [&] {{ "
                             f"{kern}(({st}*)d, (const {st}*)x, pl); }}); }}")
    return "\n".join(lines)


def _build_args() -> dict:
    return dict(name="structural_emu", wrappers=_wrappers(),
                sources=("permute.cu", "structural.cu"))


cuda_emu.ahead(__name__, _build_args)


@pytest.fixture(scope="module")
def lib():
    return cuda_emu.build(**_build_args())


class EmuSession(FakeSession):
    """The structural functions over host memory; launches run the emulated kernels."""

    def __init__(self, lib) -> None:
        self.lib = lib
        self.launched: list[str] = []
        super().__init__(FakeContext(HostMemory(16), self._launch, multiprocessor_count=1),
                         structural.METHODS)

    def _launch(self, fn, grid, block, shared, args):
        name, targs = re.match(r"tf::(\w+)<(.*)>", fn).groups()
        if name in ("fill", "strided_copy", "scale_inplace"):
            raise AssertionError(f"unexpected {fn}")
        targs = [a.strip() for a in targs.split(",")]
        size, idx = SIZE[targs[0]], targs[-1][4:]
        sym = {"permute_rows": f"rows_{size}_{targs[1]}_{idx}",
               "permute_tiled": f"tiled_{size}_{idx}", "tri_copy": f"tri_{size}_{idx}"}[name]
        self.__dict__["launched"].append(name)
        f = getattr(self.__dict__["lib"], sym)
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint,
                      ctypes.c_uint]
        f(args[0], args[1], args[2], grid[0], grid[1])

    def up(self, a: np.ndarray) -> Tensor:
        a = np.ascontiguousarray(a)
        t = self.ctx.alloc(as_dtype(a.dtype), a.shape, "up")
        if a.nbytes:
            ctypes.memmove(t.buffer.ptr, a.ctypes.data, a.nbytes)
        return t

    def down(self, t) -> np.ndarray:
        base = t.base
        n = base.size * t.itemsize
        if t.size == 0:
            return np.empty(t.shape, t.dtype.numpy)
        raw = (ctypes.c_uint8 * max(n, 1)).from_address(base.buffer.ptr)
        flat = np.frombuffer(raw, np.uint8, n).view(t.dtype.numpy).copy()
        idx = np.full(t.shape, t.offset, dtype=np.int64)
        for axis, (e, st) in enumerate(zip(t.shape, t.strides)):
            sh = [1] * t.ndim
            sh[axis] = e
            idx = idx + (np.arange(e) * st).reshape(sh)
        return flat[idx]


@pytest.fixture(scope="module")
def s(lib):
    return EmuSession(lib)


DTYPES = [np.bool_, np.int8, np.float16, ml_dtypes.bfloat16, np.float32, np.int64,
          np.complex64, np.complex128]


def sample(dt, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.issubdtype(dt, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if np.issubdtype(np.dtype(dt), np.integer):
        return rng.integers(-100, 100, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def same(got, ref):
    ref = np.ascontiguousarray(ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert got.tobytes() == ref.tobytes()


ids = [np.dtype(d).name for d in DTYPES]


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
def test_all_rank4_permutations(s, dt):
    a = sample(dt, (3, 5, 7, 2))
    t = s.up(a)
    for perm in itertools.permutations(range(4)):
        same(s.down(s.transpose(t, perm)), a.transpose(perm))


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(64, 128), (67, 33), (1, 9), (130, 64)], ids=str)
def test_transpose_2d(s, dt, shape):
    a = sample(dt, shape)
    same(s.down(s.transpose(s.up(a), (1, 0))), a.T)


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
def test_views_and_compaction(s, dt):
    a = sample(dt, (17, 33, 65))
    t = s.up(a)
    views = [(t[::2, 3:, ::-3], a[::2, 3:, ::-3]), (t[:, ::2], a[:, ::2]),
             (t.permute((2, 0, 1))[1:, :, 5:], a.transpose(2, 0, 1)[1:, :, 5:])]
    for v, ref in views:
        same(s.down(s.to_contiguous_read(v)), ref)
        same(s.down(s.transpose(v, (1, 2, 0))), ref.transpose(1, 2, 0))
        same(s.down(s.reshape(v, (ref.size,))), ref.reshape(-1))


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
def test_broadcast_diagonals_triangles(s, dt):
    x = sample(dt, (5, 1, 3))
    tx = s.up(x)
    same(s.down(s.broadcast_in_dim(tx, (4, 5, 6, 3), (1, 2, 3))),
         np.broadcast_to(x[None], (4, 5, 6, 3)))
    same(s.down(s.broadcast_in_dim(tx, (3, 2, 5), (2, 1, 0))),
         np.broadcast_to(x.transpose(2, 1, 0), (3, 2, 5)))
    m = sample(dt, (4, 6, 5), 1)
    tm = s.up(m)
    for a, b in [(0, 2), (2, 0), (1, 2)]:
        ref = np.moveaxis(np.diagonal(m, axis1=a, axis2=b), -1, a if a < b else a - 1)
        same(s.down(s.extract_diagonal(tm, a, b)), ref)
    e = sample(dt, (3, 4), 2)
    for a, b in [(0, 0), (1, 2)]:
        out = s.down(s.embed_diagonal(s.up(e), a, b))
        a2 = a if a < b else a + 1
        i = np.indices(out.shape)
        assert not out[i[a2] != i[b]].astype(bool).any()
        back = np.moveaxis(np.diagonal(out, axis1=a2, axis2=b), -1, a2 if a2 < b else a2 - 1)
        same(back, e)
    for k in (-2, 0, 3):
        same(s.down(s.tril(tm, k)), np.tril(m, k))
        same(s.down(s.triu(tm[:, ::-2, 1:], k)), np.triu(m[:, ::-2, 1:], k))


@pytest.mark.parametrize("dt", DTYPES, ids=ids)
def test_copy_into_strided_destination(s, dt):
    d = s.up(np.zeros((10, 12), dt))
    src = sample(dt, (5, 4))
    s.copy_read_into(s.up(src).T, d[::2, 1::3].T)
    ref = np.zeros((10, 12), dt)
    ref[::2, 1::3] = src
    same(s.down(d), ref)
    assert {"permute_rows", "permute_tiled"} & set(s.launched)
