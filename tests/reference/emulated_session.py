"""A session whose indexing ops run on the kernel emulator: the op methods run unchanged,
memory is a numpy heap (kernel_emulator.Memory) and every launch executes in
kernel_emulator. ``FakeDriver`` stands in for the copies and memsets of ``kernels.device``
(patch it into the op modules)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from tenferro_cuda import DType, RuntimeStateError, ValidationError
from tenferro_cuda.ops.indexing import IndexingOps
from tenferro_cuda.tensor import Tensor, TensorView, _Strided

from . import kernel_emulator as emu


class EmuSession(IndexingOps):
    """IndexingOps over emulated memory: launches run in kernel_emulator."""

    def __init__(self) -> None:
        self.mem = emu.Memory()
        self.launches: list = []
        pool = SimpleNamespace(alloc=lambda n, stream, op: self.mem.alloc(n))
        self._rt = SimpleNamespace(pool=pool, info=SimpleNamespace(
            multiprocessor_count=132, arch=90, l2_cache_bytes=60 << 20))
        self._state = SimpleNamespace(stream=None, prepared={})

    def _begin(self, op):
        return self._state

    def _resident(self, t, op, what="input"):
        if not isinstance(t, _Strided):
            raise ValidationError(f"{what} must be a Tensor or TensorView", op=op)
        if t.base.buffer is None:
            raise RuntimeStateError(f"{what}: a host tensor", op=op)

    def _alloc(self, dtype, shape, op):
        nbytes = math.prod(shape) * dtype.itemsize
        return Tensor._make(dtype, tuple(shape), buffer=self.mem.alloc(nbytes))

    def _run(self, launch, op):
        self.launches.append(launch)
        emu.run(self.mem, launch)

    def _compact(self, view, op):
        out = self._alloc(view.dtype, view.shape, op)
        self._write(out, self.download(view))
        return out

    def _write(self, t, array):
        raw = np.ascontiguousarray(array, t.dtype.numpy).reshape(-1).view(np.uint8)
        lo = t.base.buffer.ptr - emu.BASE
        self.mem.heap[lo:lo + raw.size] = raw

    def upload(self, array, pad: int = 0):
        """A device tensor of ``array``; ``pad`` > 0 returns a strided view instead."""
        array = np.asarray(array)
        if not pad or array.ndim == 0:
            t = self._alloc(DType.of(array.dtype), array.shape, "upload")
            self._write(t, array)
            return t
        big = np.zeros(tuple(n * 2 + pad for n in array.shape), array.dtype)
        sl = tuple(slice(pad, pad + 2 * n, 2) for n in array.shape)
        big[sl] = array
        base = self.upload(big)
        strides = [2 * s for s in base.strides]
        return TensorView(base, array.shape, strides, sum(pad * s for s in base.strides))

    def download(self, t):
        lo = t.base.buffer.ptr - emu.BASE if t.base.buffer.ptr else 0
        flat = self.mem.heap[lo:lo + t.base.nbytes].view(t.dtype.numpy)
        idx = np.full(t.shape, t.offset, np.int64)
        for ax, (n, st_) in enumerate(zip(t.shape, t.strides)):
            shp = [1] * t.ndim
            shp[ax] = n
            idx = idx + (np.arange(n) * st_).reshape(shp)
        return flat[idx] if t.size else np.zeros(t.shape, t.dtype.numpy)


class FakeDriver:
    def __init__(self, mem):
        self.mem = mem

    def memcpy_dtod_async(self, dst, src, nbytes, stream, op=""):
        self.mem.write(dst, 1, np.arange(nbytes), self.mem.read(src, 1, np.arange(nbytes)))

    def memset_d8_async(self, ptr, value, nbytes, stream, op=""):
        self.mem.write(ptr, 1, np.arange(nbytes), np.full(nbytes, value, np.uint8).view("V1"))
