"""The dot family end to end on the CPU: the GPU tier's tests (tests/gpu/test_dot_*.py)
run unchanged against an emulated device.

The session is the real dot family (validation, planning, cache slots, staging, grouped
GEMM, argument assembly) and the transfer family (uploads, downloads) over a fake
execution context (``reference.fake_context.FakeContext``) whose memory is emulated:
device addresses are host addresses of numpy buffers, and every access is bounds-checked
against its allocation. cuBLAS is the real ``exec.blas.Blas`` over a numpy model of the
cuBLAS bindings' column-major semantics (op N/T/C, leading dimensions, strided batches,
grouped pointer arrays read from "device" memory, host scalars read from the addresses
passed, argument checks as cuBLAS makes them); the integer kernel is a numpy model of its
wrapping arithmetic decoded from the launch's parameters (the kernel source itself runs
in test_dot_int_emulated.py); the storage family's copies and scaling are numpy models
(their kernels are tested with the storage family). What this cannot show is cuBLAS's own
numerics and speed: the GPU tier does.
"""

from __future__ import annotations

import bisect
import ctypes
import struct

import ml_dtypes
import numpy as np
import pytest
import test_dot_accum
import test_dot_cached
import test_dot_general
import test_dot_grouped
import test_dot_int
from dot_fakes import PinnedStub
from reference.fake_context import FakeContext, FakeSession

from tenferro_cuda import _cublas
from tenferro_cuda.exec.blas import Blas
from tenferro_cuda.ops import dot, storage, transfer
from tenferro_cuda.ops.storage import copy as storage_copy

CUDA_TYPES = {0: np.float32, 1: np.float64, 2: np.float16, 4: np.complex64, 5: np.complex128,
              14: ml_dtypes.bfloat16}
NUMPY = {"signed char": np.int8, "unsigned char": np.uint8, "short": np.int16,
         "unsigned short": np.uint16, "int": np.int32, "unsigned int": np.uint32,
         "long long": np.int64, "unsigned long long": np.uint64}


class Memory:
    """Emulated device memory: numpy byte buffers at their host addresses (garbage-
    initialised); ``gather``/``scatter`` check every element against its allocation."""

    def __init__(self) -> None:
        self.bufs: dict[int, np.ndarray] = {}
        self.bases: list[int] = []

    def alloc(self, nbytes: int) -> int:
        if nbytes <= 0:
            return 0
        if nbytes < 1 << 20:
            raw = np.frombuffer(np.random.bytes(nbytes + 256), np.uint8).copy()
        else:  # a cuBLAS workspace: never read
            raw = np.empty(nbytes + 256, np.uint8)
        ptr = (raw.ctypes.data + 255) // 256 * 256
        arr = raw[ptr - raw.ctypes.data:][:nbytes]
        self.bufs[ptr] = arr
        bisect.insort(self.bases, ptr)
        return ptr

    def _check(self, ptr: int, nbytes: int) -> None:
        i = bisect.bisect_right(self.bases, ptr) - 1
        if i >= 0 and ptr < self.bases[i] + self.bufs[self.bases[i]].size:
            assert ptr + nbytes <= self.bases[i] + self.bufs[self.bases[i]].size, \
                "copy past the allocation"

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Device/host copies (host addresses are numpy arrays' own: not checked)."""
        if nbytes:
            self._check(dst, nbytes)
            self._check(src, nbytes)
            ctypes.memmove(dst, src, nbytes)

    def memset(self, dst: int, value: int, nbytes: int) -> None:
        if nbytes:
            self._check(dst, nbytes)
            ctypes.memset(dst, value, nbytes)

    def typed(self, ptr: int, npd) -> tuple[np.ndarray, int]:
        """(the buffer as ``npd`` elements, element index of ``ptr``)."""
        base = self.bases[bisect.bisect_right(self.bases, ptr) - 1]
        arr = self.bufs[base]
        npd = np.dtype(npd)
        assert 0 <= ptr - base < arr.size and (ptr - base) % npd.itemsize == 0
        return arr.view(npd), (ptr - base) // npd.itemsize

    def gather(self, ptr: int, npd, idx):
        arr, off = self.typed(ptr, npd)
        idx = off + np.asarray(idx)
        assert idx.size == 0 or (idx.min() >= 0 and idx.max() < arr.size), "out of bounds"
        return arr[idx]

    def scatter(self, ptr: int, npd, idx, values) -> None:
        arr, off = self.typed(ptr, npd)
        idx = off + np.asarray(idx)
        assert idx.size == 0 or (idx.min() >= 0 and idx.max() < arr.size), "out of bounds"
        arr[idx] = values


class FakeCublas:
    """A numpy model of the cuBLAS entry points the dot family calls."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.handles: set[int] = set()

    def create(self) -> int:
        h = len(self.handles) + 1
        self.handles.add(h)
        return h

    def destroy(self, h: int) -> None:
        self.handles.discard(h)

    def set_stream(self, h, stream) -> None:
        assert h in self.handles

    def set_pointer_mode(self, h, mode) -> None:
        assert mode == 0  # host scalars

    def set_math_mode(self, h, mode) -> None:
        assert mode == 0

    def set_workspace(self, h, ptr, nbytes) -> None:
        assert nbytes == 32 << 20

    def _scalar(self, addr: int, npd, compute: int):
        cplx = npd.kind == "c"
        fmt = ("ff" if cplx else "f") if compute in (68, 77) else ("dd" if cplx else "d")
        vals = struct.unpack(fmt, ctypes.string_at(addr, struct.calcsize(fmt)))
        return complex(*vals) if cplx else vals[0]

    def _gemm(self, ta, tb, m, n, k, alpha, pa, dt, lda, pb, ldb, beta, pc, ldc, compute,
              batch=1, sa=0, sb=0, sc=0):
        npd = np.dtype(CUDA_TYPES[dt])
        wide = np.complex128 if npd.kind == "c" else np.float64
        alpha, beta = self._scalar(alpha, npd, compute), self._scalar(beta, npd, compute)
        assert lda >= max(1, m if ta == 0 else k) and ldb >= max(1, k if tb == 0 else n)
        assert ldc >= max(1, m) and batch >= 1

        def read(ptr, rows, cols, op, ld):
            r, c = np.arange(rows)[:, None], np.arange(cols)[None, :]
            v = self.mem.gather(ptr, npd, r + c * ld if op == 0 else c + r * ld).astype(wide)
            return np.conj(v) if op == 2 else v

        item = npd.itemsize
        cidx = np.arange(m)[:, None] + np.arange(n)[None, :] * ldc
        for i in range(batch):
            res = alpha * (read(pa + i * sa * item, m, k, ta, lda)
                           @ read(pb + i * sb * item, k, n, tb, ldb))
            if beta != 0:
                res = res + beta * self.mem.gather(pc + i * sc * item, npd, cidx).astype(wide)
            self.mem.scatter(pc + i * sc * item, npd, cidx, res.astype(npd))

    def gemm_ex(self, h, ta, tb, m, n, k, al, a, dt, lda, b, dt2, ldb, be, c, dt3, ldc, comp,
                algo):
        self._gemm(ta, tb, m, n, k, al, a, dt, lda, b, ldb, be, c, ldc, comp)

    def gemm_strided_batched_ex(self, h, ta, tb, m, n, k, al, a, dt, lda, sa, b, dt2, ldb, sb,
                                be, c, dt3, ldc, sc, batch, comp, algo):
        self._gemm(ta, tb, m, n, k, al, a, dt, lda, b, ldb, be, c, ldc, comp, batch, sa, sb, sc)

    gemm_ex_64 = gemm_ex
    gemm_strided_batched_ex_64 = gemm_strided_batched_ex

    def gemm_batched_ex(self, h, ta, tb, m, n, k, alpha, aarr, dt, lda, barr, dt2, ldb, beta,
                        carr, dt3, ldc, batch, comp, algo):
        ptrs = [self.mem.gather(p, np.int64, np.arange(batch)) for p in (aarr, barr, carr)]
        for i in range(batch):
            self._gemm(ta, tb, m, n, k, alpha, int(ptrs[0][i]), dt, lda, int(ptrs[1][i]), ldb,
                       beta, int(ptrs[2][i]), ldc, comp)

    def gemm_grouped_batched_ex(self, h, ta, tb, m, n, k, alpha, aarr, dt, lda, barr, dt2, ldb,
                                beta, carr, dt3, ldc, groups, sizes, comp):
        assert npd_kind(dt) != "c", "cuBLAS has no complex grouped GEMM"

        def ints(arg):  # a host int32 array's address, as the bindings pass it on
            return list((ctypes.c_int32 * groups).from_address(arg))
        ta, tb, m, n, k, lda, ldb, ldc, sizes = map(ints, (ta, tb, m, n, k, lda, ldb, ldc,
                                                           sizes))
        size = 4 if comp in (68, 77) else 8
        total = sum(sizes)
        ptrs = [self.mem.gather(p, np.int64, np.arange(total)) for p in (aarr, barr, carr)]
        p = 0
        for g in range(groups):
            block = ctypes.create_string_buffer(ctypes.string_at(alpha + g * size, size)
                                                + ctypes.string_at(beta + g * size, size))
            addr = ctypes.addressof(block)
            for _ in range(sizes[g]):
                self._gemm(ta[g], tb[g], m[g], n[g], k[g], addr, int(ptrs[0][p]), dt, lda[g],
                           int(ptrs[1][p]), ldb[g], addr + size, int(ptrs[2][p]), ldc[g], comp)
                p += 1


def npd_kind(dt: int) -> str:
    return np.dtype(CUDA_TYPES[dt]).kind


def _index(shape, strides, offset) -> np.ndarray:
    idx = np.full(tuple(shape), offset, np.int64)
    for ax, (n, st) in enumerate(zip(shape, strides)):
        sh = [1] * len(shape)
        sh[ax] = n
        idx = idx + (np.arange(n) * st).reshape(sh)
    return idx


class EmuContext(FakeContext):
    """The fake execution context over emulated memory: a real ``Blas`` on first use,
    launches of the integer kernel run by a numpy model, and a host word standing in for
    the context's pinned one (``err_host``: small transfers go through it)."""

    def __init__(self, mem: Memory) -> None:
        super().__init__(mem, self._launch)
        self.mem = mem
        self.stream = 0
        self._word = ctypes.create_string_buffer(8)
        self.err_host = ctypes.addressof(self._word)

    def blas(self, op):
        if self.blas_impl is None:
            self.blas_impl = Blas(self, op)
        return self.blas_impl

    def _launch(self, fn, grid, block, shared, args) -> None:
        assert fn.startswith("tf::dot_int<") and block == (256, 1, 1), fn
        (pc, pa, pb, batch, m, n, k, lb, lm, lk, rb, rk, rn, ob, om, on, alpha, beta,
         beta_zero) = args
        npd = np.dtype(NUMPY[fn[len("tf::dot_int<"):-1]])
        im, jn = np.arange(m)[:, None], np.arange(n)[None, :]
        kr, kc = np.arange(k)[None, :], np.arange(k)[:, None]
        u64 = np.uint64
        with np.errstate(over="ignore"):
            for z in range(batch):
                left = self.mem.gather(pa, npd, z * lb + im * lm + kr * lk).astype(u64)
                right = self.mem.gather(pb, npd, z * rb + kc * rk + jn * rn).astype(u64)
                idx = z * ob + im * om + jn * on
                res = u64(alpha) * (left @ right)
                if not beta_zero:
                    res = res + u64(beta) * self.mem.gather(pc, npd, idx).astype(u64)
                self.mem.scatter(pc, npd, idx, res.astype(npd))


def _copy_layout(mem: Memory):
    """A numpy model of ``storage.copy.copy_layout`` (``dst[...] = src[...]``)."""
    def copy_layout(ctx, shape, sbase, ss, so, dbase, ds, do, op) -> None:
        if int(np.prod(shape)) == 0:
            return
        npd = np.dtype(sbase.dtype.numpy)
        values = mem.gather(sbase.buffer.ptr, npd, _index(shape, ss, so))
        mem.scatter(dbase.buffer.ptr, npd, _index(shape, ds, do), values)
    return copy_layout


def _scale(mem: Memory):
    """A numpy model of ``storage.scale`` (``out[...] *= factor``)."""
    def scale(ctx, out, factor, op) -> None:
        if out.size:
            npd = np.dtype(out.dtype.numpy)
            idx = _index(out.shape, out.strides, out.offset)
            with np.errstate(over="ignore"):
                vals = mem.gather(out.base.buffer.ptr, npd, idx) * np.asarray(factor, npd)
            mem.scatter(out.base.buffer.ptr, npd, idx, vals.astype(npd))
    return scale


@pytest.fixture
def s(monkeypatch):
    PinnedStub().install(monkeypatch)  # the pointer arrays' staging: host buffers
    saved = dict(_cublas._state)
    mem = Memory()
    _cublas._state.clear()
    _cublas._state.update(lib=FakeCublas(mem), version=(13, 1, 0))
    monkeypatch.setattr(storage_copy, "copy_layout", _copy_layout(mem))
    monkeypatch.setattr(storage, "scale", _scale(mem))
    ctx = EmuContext(mem)
    try:
        yield FakeSession(ctx, dot.METHODS, transfer.METHODS)
    finally:
        if ctx.blas_impl is not None:
            ctx.blas_impl.close()
        _cublas._state.clear()
        _cublas._state.update(saved)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


# The GPU tier's tests, collected here under emulated_<module>_<name>. Left out: the two
# grid-limit tests (the emulation has no grid) and the precision tests whose point is the
# device's arithmetic (the model computes in float64).
_SKIP = {"test_batch_beyond_grid_z", "test_rows_beyond_grid_y",
         "test_default_precision_is_exact_float32", "test_half_types_accumulate_in_float32",
         "test_large_square_float64"}
for _mod in (test_dot_general, test_dot_accum, test_dot_cached, test_dot_grouped,
             test_dot_int):
    _short = _mod.__name__.removeprefix("test_dot_")
    for _name in dir(_mod):
        if _name.startswith("test_") and _name not in _SKIP:
            globals()[f"test_emulated_{_short}_{_name[5:]}"] = getattr(_mod, _name)
