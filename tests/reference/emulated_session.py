"""A session whose indexing ops run on the kernel emulator: the family functions run
unchanged over a ``FakeContext`` (tests/reference/fake_context.py) whose memory is a numpy
heap (``kernel_emulator.Memory``) and whose launches execute in ``kernel_emulator``.

Storage copies the ops ask for (``ops.storage.materialize`` of a strided ``updates``) are
``ptx/permute.cu`` launches; they run here by their plan's meaning (every element of the
packed ``RowPlan``/``TilePlan`` index space copied once), not by the kernel's thread
mapping, which tests/cpu/test_structural_emulated.py covers.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

import numpy as np

from tenferro_cuda import DType
from tenferro_cuda.ops import indexing
from tenferro_cuda.ops.storage.plan import ROW_RANK, TILE_RANK
from tenferro_cuda.tensor import TensorView

from . import kernel_emulator as emu
from .fake_context import FakeContext, FakeSession

__all__ = ["EmuSession", "EmuMemory", "Launched"]

_ROW = {"tf::u32": struct.Struct("<21I6I4i4x"), "tf::u64": struct.Struct("<21Q6Q4i")}
_TILE = {"tf::u32": struct.Struct("<18I10IQ2i"), "tf::u64": struct.Struct("<18Q10QQ2i")}
_MASK = {"tf::u32": (1 << 32) - 1, "tf::u64": (1 << 64) - 1}


class EmuMemory:
    """``kernel_emulator.Memory`` as FakeContext's memory model: addresses from ``alloc``,
    copies and memsets checked against the allocations like every emulated access."""

    def __init__(self, mem: emu.Memory) -> None:
        self.mem = mem

    def alloc(self, nbytes: int) -> int:
        return self.mem.alloc(nbytes).ptr

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self.mem.write(dst, 1, np.arange(nbytes), self.mem.read(src, 1, np.arange(nbytes)))

    def memset(self, dst: int, value: int, nbytes: int) -> None:
        self.mem.write(dst, 1, np.arange(nbytes), np.full(nbytes, value, np.uint8).view("V1"))


@dataclass(frozen=True)
class Launched:
    """One launch as the context received it (``args``: head values, then the tail)."""

    expression: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    args: tuple


def _affine(extents, strides, base: int, mask: int) -> np.ndarray:
    """Offsets ``base + sum(i_d * strides[d])`` over ``extents`` in row-major order, in the
    kernel's unsigned index arithmetic (strides were packed modulo the index width)."""
    off = np.full((1,), base, np.uint64)
    for n, st in zip(extents, strides):
        off = (off[:, None] + np.arange(n, dtype=np.uint64)[None, :] * np.uint64(st)).ravel()
    return (off & np.uint64(mask)).astype(np.int64)


def _permute(mem: emu.Memory, name: str, targs: list[str], dst: int, src: int,
             params: bytes) -> None:
    size, index = emu.UNIT[targs[0]], targs[-1]
    mask = _MASK[index]
    if name == "permute_rows":
        v = _ROW[index].unpack(params)
        r = ROW_RANK
        rank = v[3 * r + 6]
        outer, oss, ods = v[:rank], v[r:r + rank], v[2 * r:2 * r + rank]
        cols, sst, dinc, so, do = v[3 * r + 1:3 * r + 6]
        assert v[3 * r] == int(np.prod(outer)), "row count differs from the outer extents"
        s_off = _affine((*outer, cols), (*oss, sst), so, mask)
        d_off = _affine((*outer, cols), (*ods, dinc), do, mask)
    else:
        v = _TILE[index].unpack(params)
        t = TILE_RANK
        rank = v[3 * t + 11]
        ext, rss, rds = v[:rank], v[t:t + rank], v[2 * t:2 * t + rank]
        nj, nk, ssj, ssk, dsj, dsk, so, do = v[3 * t:3 * t + 8]
        s_off = _affine((*ext, nj, nk), (*rss, ssj, ssk), so, mask)
        d_off = _affine((*ext, nj, nk), (*rds, dsj, dsk), do, mask)
    assert np.unique(d_off).size == d_off.size, "a destination element written twice"
    mem.write(dst, size, d_off, mem.read(src, size, s_off))


class EmuSession(FakeSession):
    """The indexing ``METHODS`` over emulated memory: launches run in kernel_emulator and
    are recorded in ``launches``; ``info`` overrides FakeContext's device numbers."""

    def __init__(self, **info) -> None:
        self.mem = emu.Memory()
        self.launches: list[Launched] = []
        super().__init__(FakeContext(EmuMemory(self.mem), self._launch, **info),
                         indexing.METHODS)

    def _launch(self, fn, grid, block, shared, args) -> None:
        self.launches.append(Launched(fn, tuple(grid), tuple(block), shared, tuple(args)))
        name, targs = re.match(r"tf::(\w+)(?:<(.*)>)?$", fn).groups()
        if name in ("permute_rows", "permute_tiled"):
            _permute(self.mem, name, [a.strip() for a in targs.split(",")], *args)
            return
        emu.run(self.mem, self.launches[-1])

    def _write(self, t, array) -> None:
        raw = np.ascontiguousarray(array, t.dtype.numpy).reshape(-1).view(np.uint8)
        lo = t.base.buffer.ptr - emu.BASE
        self.mem.heap[lo:lo + raw.size] = raw

    def upload(self, array, pad: int = 0):
        """A device tensor of ``array``; ``pad`` > 0 returns a strided view instead."""
        array = np.asarray(array)
        if not pad or array.ndim == 0:
            t = self.ctx.alloc(DType.of(array.dtype), array.shape, "upload")
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
