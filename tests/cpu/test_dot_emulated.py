"""The dot family end to end on the CPU: the GPU tier's tests (tests/gpu/test_dot_*.py)
run unchanged against an emulated device.

The session is the real ``DotOps`` (validation, planning, cache slots, staging, grouped
GEMM, argument packing) over emulated memory: device addresses map to numpy byte
buffers, and every access is bounds-checked against its buffer. cuBLAS is replaced by a
numpy model of its column-major semantics (op N/T/C, leading dimensions, strided batches,
grouped pointer arrays read from "device" memory, host scalars read from the addresses
passed, argument checks as cuBLAS makes them); the integer kernel by a numpy model of its
wrapping arithmetic decoded from the packed parameter block (the kernel source itself runs
in test_dot_int_emulated.py). What this cannot show is cuBLAS's own numerics and speed:
the GPU tier does.
"""

from __future__ import annotations

import bisect
import ctypes
import itertools
import struct
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
import test_dot_accum
import test_dot_cached
import test_dot_general
import test_dot_grouped
import test_dot_int

from tenferro_cuda import _cublas
from tenferro_cuda.dtypes import as_dtype
from tenferro_cuda.errors import RuntimeStateError
from tenferro_cuda.ops.dot import DotOps
from tenferro_cuda.ops.transfer import TransferOps
from tenferro_cuda.tensor import Tensor, _Strided

CUDA_TYPES = {0: np.float32, 1: np.float64, 2: np.float16, 4: np.complex64, 5: np.complex128,
              14: ml_dtypes.bfloat16}
_addresses = itertools.count(1 << 20, 1 << 26)


class Memory:
    """Emulated device memory: base address -> numpy bytes (garbage-initialised)."""

    def __init__(self) -> None:
        self.bufs: dict[int, np.ndarray] = {}
        self.bases: list[int] = []

    def alloc(self, nbytes: int) -> int:
        if not nbytes:
            return 0
        ptr = next(_addresses)
        self.bufs[ptr] = np.frombuffer(np.random.bytes(nbytes), np.uint8).copy()
        bisect.insort(self.bases, ptr)
        return ptr

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

    def gemm_grouped_batched_ex(self, h, ta, tb, m, n, k, alpha, aarr, dt, lda, barr, dt2, ldb,
                                beta, carr, dt3, ldc, groups, sizes, comp):
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


class _Buf:
    def __init__(self, mem: Memory, nbytes: int, stream) -> None:
        self.ptr, self.nbytes, self.stream = mem.alloc(nbytes), nbytes, stream
        self.domain, self.freed, self.ordinal = 7, False, 0


class EmuSession(DotOps, TransferOps):
    """DotOps over emulated memory; launches run numpy models."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self._rt = SimpleNamespace(domain=SimpleNamespace(value=7), ordinal=0,
                                   identity=SimpleNamespace(serial=1),
                                   info=SimpleNamespace(multiprocessor_count=132))
        self._state = SimpleNamespace(prepared={}, stream=object(), pending=[])

    def _begin(self, op):
        return self._state

    def synchronize(self) -> None:
        pass

    def _alloc(self, dtype, shape, op):
        n = int(np.prod(shape)) * dtype.itemsize
        return Tensor._make(dtype, tuple(shape), buffer=_Buf(self.mem, n, self._state.stream))

    def _index(self, t):
        idx = np.full(t.shape, t.offset, np.int64)
        for ax, (n, st) in enumerate(zip(t.shape, t.strides)):
            sh = [1] * t.ndim
            sh[ax] = n
            idx = idx + (np.arange(n) * st).reshape(sh)
        return t.base.buffer.ptr, np.dtype(t.dtype.numpy), idx

    def upload_host_tensor(self, t):
        a = np.ascontiguousarray(t.numpy() if isinstance(t, _Strided) else np.asarray(t))
        out = self._alloc(as_dtype(a.dtype), a.shape, "upload_host_tensor")
        if a.nbytes:
            self.mem.bufs[out.buffer.ptr][:] = a.view(np.uint8).reshape(-1)
        return out

    def download_to_host(self, t):
        if not isinstance(t, _Strided) or t.base.buffer is None:
            raise RuntimeStateError("not a device tensor", op="download_to_host")
        if t.size == 0:
            return Tensor.from_numpy(np.empty(t.shape, t.dtype.numpy))
        return Tensor.from_numpy(self.mem.gather(*self._index(t)).copy())

    def _copy_into(self, src, dst, op):
        if src.size:
            self.mem.scatter(*self._index(dst), self.mem.gather(*self._index(src)))

    def _fill(self, out, value, op):
        if out.size:
            self.mem.scatter(*self._index(out), value)

    def _scale(self, out, factor, op):
        if out.size:
            ptr, npd, idx = self._index(out)
            with np.errstate(over="ignore"):
                vals = self.mem.gather(ptr, npd, idx) * np.asarray(factor, npd)
            self.mem.scatter(ptr, npd, idx, vals.astype(npd))

    def _dot_handle(self, op):
        return self._state.prepared.setdefault(("dot", "cublas-handle"),
                                               SimpleNamespace(value=1))

    def _fn(self, family, expression):
        assert family == "dot_int"
        return expression

    def _launch(self, fn, grid, block, params, op, shared=0):
        wide = "long long" in fn
        pack = self._state.prepared[("dot_int", wide)]
        (pc, pa, pb, batch, m, n, k, lb, lm, lk, rb, rk, rn, ob, om, on, alpha, beta,
         beta_zero) = pack._struct.unpack_from(pack._buf, pack._shift)
        npd = np.dtype({"signed char": np.int8, "unsigned char": np.uint8, "int": np.int32,
                        "long long": np.int64}[fn[len("tf::dot_int<"):-1]])
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


@pytest.fixture
def s():
    saved = dict(_cublas._state)
    mem = Memory()
    _cublas._state.clear()
    _cublas._state.update(lib=FakeCublas(mem), version=(13, 1, 0))
    try:
        yield EmuSession(mem)
    finally:
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
