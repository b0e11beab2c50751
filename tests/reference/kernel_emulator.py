"""A CPU emulator of ptx/gather.cu, scatter.cu and slicing.cu, for testing the indexing
ops end to end without a GPU: the op methods run unchanged on a session whose memory is a
numpy heap and whose launches are executed here, from the packed argument images.

Each kernel is transcribed from its CUDA source (same index math, same clamping and
bounds rules, same combiner rules; atomics applied one update at a time in index order).
Every emulated memory access is checked against the allocation its pointer belongs to.
"""

from __future__ import annotations

import math
import re
import struct

import ml_dtypes
import numpy as np

BASE = 1 << 32
_LAYOUT = struct.Struct("<8q8qqii")
_MAP = struct.Struct("<8q8qqii")
_PAD = struct.Struct("<40qqii")
UNIT = {"tf::u8": 1, "unsigned short": 2, "tf::u32": 4, "tf::u64": 8, "tf::b128": 16}
NUMPY = {"signed char": np.int8, "unsigned char": np.uint8, "short": np.int16,
         "unsigned short": np.uint16, "int": np.int32, "unsigned int": np.uint32,
         "long long": np.int64, "unsigned long long": np.uint64, "tf::half": np.float16,
         "tf::bfloat16": ml_dtypes.bfloat16, "float": np.float32, "double": np.float64,
         "tf::complex<float>": np.complex64, "tf::complex<double>": np.complex128}


class Buffer:
    """A fake DeviceBuffer: an address range of the heap."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.ptr, self.nbytes, self.freed = ptr, nbytes, False


class Memory:
    def __init__(self, size: int = 1 << 26) -> None:
        self.heap = np.zeros(size, np.uint8)
        self.top = 512
        self.buffers: list[Buffer] = []

    def alloc(self, nbytes: int) -> Buffer:
        if nbytes <= 0:
            return Buffer(0, 0)
        start = -(-self.top // 512) * 512
        self.top = start + nbytes
        assert self.top <= self.heap.size, "emulated heap exhausted"
        self.heap[start:self.top] = 0xA5  # garbage, like fresh device memory
        buf = Buffer(BASE + start, nbytes)
        self.buffers.append(buf)
        return buf

    def owner(self, ptr: int) -> Buffer:
        for b in self.buffers:
            if b.ptr <= ptr < b.ptr + max(b.nbytes, 1):
                return b
        raise AssertionError(f"address {ptr:#x} is in no allocation")

    def units(self, ptr: int, size: int, offsets) -> tuple[np.ndarray, np.ndarray]:
        """(void view of the owning buffer in units of ``size``, unit indices); checked."""
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.size == 0:
            return np.zeros(0, f"V{size}"), offsets
        buf = self.owner(ptr)
        shift = ptr - buf.ptr
        assert shift % size == 0, "misaligned unit pointer"
        lo, n = buf.ptr - BASE, buf.nbytes // size
        idx = offsets + shift // size
        if idx.size:
            assert idx.min() >= 0 and idx.max() < n, \
                f"access [{idx.min()}, {idx.max()}] outside {n} units of {buf}"
        return self.heap[lo:lo + n * size].view(f"V{size}"), idx

    def read(self, ptr, size, offsets):
        arr, idx = self.units(ptr, size, offsets)
        return arr[idx]

    def write(self, ptr, size, offsets, values) -> None:
        arr, idx = self.units(ptr, size, offsets)
        arr[idx] = values

    def typed(self, ptr, dtype, offsets):
        return self.read(ptr, np.dtype(dtype).itemsize, offsets).view(dtype)


# --- argument images ---------------------------------------------------------------------------
def layout(raw: bytes, at: int = 0):
    v = _LAYOUT.unpack_from(raw, at)
    n = v[17]
    return v[:n], v[8:8 + n], v[16]


def offsets(lay, linear):
    shape, strides, off = lay
    linear = np.asarray(linear, dtype=np.int64).copy()
    out = np.full(linear.shape, off, dtype=np.int64)
    for s, st in zip(reversed(shape), reversed(strides)):
        out += (linear % s) * st
        linear //= s
    return out


def index_map(raw: bytes):
    v = _MAP.unpack(raw)
    k = v[17]
    return dict(stride=v[:k], hi=v[8:8 + k], ivs=v[16], k=k, wide=bool(v[18]))


def load_index(mem: Memory, ptr, off, wide):
    return mem.typed(ptr, np.int64 if wide else np.int32, off).astype(np.int64)


def clamped_start(mem, m, idx, ioff):
    ioff = np.asarray(ioff, dtype=np.int64)
    out = np.zeros(ioff.shape, np.int64)
    for k in range(m["k"]):
        v = load_index(mem, idx, ioff + k * m["ivs"], m["wide"])
        out += np.clip(v, 0, m["hi"][k]) * m["stride"][k]
    return out


def checked_start(mem, m, idx, ioff):
    ioff = np.asarray(ioff, dtype=np.int64)
    out, ok = np.zeros(ioff.shape, np.int64), np.ones(ioff.shape, bool)
    for k in range(m["k"]):
        v = load_index(mem, idx, ioff + k * m["ivs"], m["wide"])
        ok &= (v >= 0) & (v <= m["hi"][k])
        out += v * m["stride"][k]
    return out, ok


# --- kernels -----------------------------------------------------------------------------------
def gather_scalar(mem, t, out, operand, base, idx, m, n):
    i = np.arange(n, dtype=np.int64)
    mm = index_map(m)
    if mm["k"] == 1:
        v = load_index(mem, idx, i, mm["wide"])
        off = base + np.clip(v, 0, mm["hi"][0]) * mm["stride"][0]
    else:
        off = base + clamped_start(mem, mm, idx, i * mm["k"])
    size = UNIT[t[0]]
    mem.write(out, size, i, mem.read(operand, size, off))


def gather_rows(mem, t, out, operand, ab, bb, idx, m, rows, units, group):
    assert group & (group - 1) == 0 and 1 <= group <= 32
    r = np.arange(rows, dtype=np.int64)
    src = offsets(layout(ab), r) + clamped_start(mem, index_map(m), idx, offsets(layout(bb), r))
    u = np.arange(units, dtype=np.int64)
    size = UNIT[t[0]]
    mem.write(out, size, (r[:, None] * units + u).ravel(),
              mem.read(operand, size, (src[:, None] + u).ravel()))


def gather_general(mem, t, out, operand, geom, idx, m, n):
    i = np.arange(n, dtype=np.int64)
    a = offsets(layout(geom, 0), i)
    b = offsets(layout(geom, _LAYOUT.size), i)
    size = UNIT[t[0]]
    mem.write(out, size, i, mem.read(operand, size, a + clamped_start(mem, index_map(m), idx, b)))


PART_ROWS = {"tf::u32": 4096, "tf::u64": 4096, "tf::b128": 2048}  # part_rows<S>


def gather_split(mem, t, out, idx, m, base, n, shift, chunks, pos, offs):
    rows, size = PART_ROWS[t[0]], UNIT[t[0]]
    nb = -(-n // rows)
    mm = index_map(m)
    off = base + clamped_start(mem, mm, idx, np.arange(n, dtype=np.int64) * mm["k"])
    assert off.min() >= 0 and (off >> shift).max() < chunks, "offset outside the chunks"
    chunk, key = off >> shift, off & ((1 << shift) - 1)
    mem.write(offs, 4, [(chunks + 1) * nb], np.zeros(1, np.uint32).view("V4"))
    for b in range(nb):
        lo, hi = b * rows, min(n, (b + 1) * rows)
        order = np.argsort(chunk[lo:hi], kind="stable")  # the device's order within a chunk
        starts = np.searchsorted(chunk[lo:hi][order], np.arange(chunks + 1))  # varies
        mem.write(offs, 4, np.arange(chunks + 1) * nb + b, starts.astype(np.uint32).view("V4"))
        units = np.zeros((hi - lo, size // 4), np.uint32)
        units[:, 0] = key[lo:hi][order]
        mem.write(out, size, np.arange(lo, hi), units.view(f"V{size}").ravel())
        mem.write(pos, 2, np.arange(lo, hi), order.astype(np.uint16).view("V2"))


def gather_chunks(mem, t, out, operand, shift, chunks, nb, offs, counter):
    rows, size = PART_ROWS[t[0]], UNIT[t[0]]
    assert mem.typed(counter, np.uint32, [0])[0] == 0, "work counter not zeroed by the split"
    o = mem.typed(offs, np.uint32, np.arange((chunks + 1) * nb)).astype(np.int64)
    o = o.reshape(chunks + 1, nb)
    assert (np.diff(o, axis=0) >= 0).all(), "chunk runs out of order"
    for b in range(nb):
        for c in range(chunks):
            j = b * rows + np.arange(o[c, b], o[c + 1, b])
            keys = mem.read(out, size, j).view(np.uint32).reshape(-1, size // 4)[:, 0]
            mem.write(out, size, j, mem.read(operand, size, (c << shift) + keys.astype(np.int64)))
    mem.write(counter, 4, [0], np.full(1, 0xFFFFFFFF, np.uint32).view("V4"))


def gather_place(mem, t, out, pos, n):
    rows, size = PART_ROWS[t[0]], UNIT[t[0]]
    for b in range(-(-n // rows)):
        j = np.arange(b * rows, min(n, (b + 1) * rows))
        p = mem.typed(pos, np.uint16, j).astype(np.int64)
        assert np.array_equal(np.sort(p), np.arange(j.size)), "positions are no permutation"
        tile = np.empty(j.size, f"V{size}")
        tile[p] = mem.read(out, size, j)
        mem.write(out, size, j, tile)


def _combine(op, dtype, old, new):
    if op == 0:  # add: 16-bit floats via float32, integers wrap
        if dtype in (np.float16, ml_dtypes.bfloat16):
            return dtype(np.float32(old) + np.float32(new))
        with np.errstate(all="ignore"):
            return (np.asarray(old) + np.asarray(new)).astype(dtype)[()]
    if np.issubdtype(dtype, np.integer):
        return max(old, new) if op == 1 else min(old, new)
    a, b = float(old), float(new)
    if a != a:
        return old
    if b != b:
        return new
    if a == b:
        neg = math.copysign(1.0, a) < 0
        return (new if neg else old) if op == 1 else (old if neg else new)
    return (old if a > b else new) if op == 1 else (old if a < b else new)


def _scatter_apply(mem, t, op, out, upd, n, off, ok, keys, winner, wide_key):
    order = np.arange(n)[ok]
    off, keys = off[ok], keys[ok]
    if op == 4:  # claim: the largest key per element
        wdt = np.dtype(np.uint64 if wide_key else np.uint32)
        arr, idx = mem.units(winner, wdt.itemsize, off)
        words = arr.view(wdt)
        np.maximum.at(words, idx, keys.astype(wdt))
        return
    if op in (3, 5):
        size = UNIT[t]
        vals = mem.read(upd, size, order)
        if op == 5:
            wdt = np.uint64 if wide_key else np.uint32
            win = mem.typed(winner, wdt, off)
            keep = win == keys.astype(wdt)
            off, vals = off[keep], vals[keep]
        mem.write(out, size, off, vals)
        return
    dtype = np.dtype(NUMPY[t])
    vals = mem.typed(upd, dtype, order)
    arr, idx = mem.units(out, dtype.itemsize, off)
    target = arr.view(dtype)
    if op == 0 or np.issubdtype(dtype, np.integer):
        ufunc = {0: np.add, 1: np.maximum, 2: np.minimum}[op]
        with np.errstate(all="ignore"):
            ufunc.at(target, idx, vals)
        return
    for o, v in zip(idx, vals):  # float max/min: NaN and signed-zero rules, in order
        target[o] = _combine(op, dtype.type, target[o], v)


def scatter_scalar(mem, t, out, upd, idx, m, n, winner, wide_key):
    mm = index_map(m)
    i = np.arange(n, dtype=np.int64)
    if mm["k"] == 1:
        v = load_index(mem, idx, i, mm["wide"])
        ok = (v >= 0) & (v <= mm["hi"][0])
        off = v * mm["stride"][0]
    else:
        off, ok = checked_start(mem, mm, idx, i * mm["k"])
    _scatter_apply(mem, t[0], int(t[1]), out, upd, n, off, ok, i + 1, winner, wide_key)


def scatter_add(mem, t, out, upd, idx, m, n, vec, keep):
    """scatter_scalar's add; vec = 1 promises 16-byte index and 4-update vector loads."""
    if vec:
        size = np.dtype(NUMPY[t[0]]).itemsize
        assert index_map(m)["k"] == 1, "vector loads need one index component"
        assert idx % 16 == 0 and upd % min(16, 4 * size) == 0, "misaligned vector loads"
    scatter_scalar(mem, [t[0], "0"], out, upd, idx, m, n, 0, 0)


def scatter_l2_normal(mem, t, p, nbytes):
    """Only changes L2 priorities: checks that the range lies in one allocation."""
    if nbytes:
        buf = mem.owner(p)
        assert p + nbytes <= buf.ptr + buf.nbytes, "demotion range outside the result"


def scatter_general(mem, t, out, upd, geom, idx, m, n, winner, wide_key):
    i = np.arange(n, dtype=np.int64)
    a = offsets(layout(geom, 0), i)
    b = offsets(layout(geom, _LAYOUT.size), i)
    c = offsets(layout(geom, 2 * _LAYOUT.size), i)
    start, ok = checked_start(mem, index_map(m), idx, b)
    _scatter_apply(mem, t[0], int(t[1]), out, upd, n, a + start, ok, c + 1, winner, wide_key)


def _shift(mem, starts, m):
    mm = index_map(m)
    return int(clamped_start(mem, mm, starts, np.zeros(1, np.int64))[0]) if mm["k"] else 0


def copy_rows(mem, t, dst, dl, src, sl, rows, cols, dinc, sinc, starts, m, dyn_dst):
    shift = _shift(mem, starts, m)
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(cols, dtype=np.int64)[None, :]
    od = offsets(layout(dl), r) + (shift if dyn_dst else 0) + c * dinc
    os_ = offsets(layout(sl), r) + (0 if dyn_dst else shift) + c * sinc
    size = UNIT[t[0]]
    mem.write(dst, size, od.ravel(), mem.read(src, size, os_.ravel()))


def copy_elems(mem, t, dst, dl, src, sl, n, starts, m, dyn_dst):
    shift = _shift(mem, starts, m)
    i = np.arange(n, dtype=np.int64)
    size = UNIT[t[0]]
    od = offsets(layout(dl), i) + (shift if dyn_dst else 0)
    os_ = offsets(layout(sl), i) + (0 if dyn_dst else shift)
    mem.write(dst, size, od, mem.read(src, size, os_))


def _pad_axis(o, lo, step, ext):
    n = o - lo
    q = np.where(n >= 0, n // step, -1)
    return (n >= 0) & (q * step == n) & (q < ext), q


def _pad(mem, t, out, src, p, rows, cols, value):
    v = _PAD.unpack(p)
    shape, lo, step, ext, stride = (v[8 * j:8 * j + 8] for j in range(5))
    outer = v[41]
    r = np.arange(rows, dtype=np.int64)
    base, ok, rem = np.full(rows, v[40], np.int64), np.ones(rows, bool), r.copy()
    for d in range(outer - 1, -1, -1):
        o = rem % shape[d]
        rem //= shape[d]
        good, q = _pad_axis(o, lo[d], step[d], ext[d])
        ok &= good
        base += np.where(good, q, 0) * stride[d]
    assert shape[7] == cols
    c = np.arange(cols, dtype=np.int64)
    good, q = _pad_axis(c, lo[7], step[7], ext[7])
    take = ok[:, None] & good[None, :]
    size = UNIT[t[0]]
    flat = np.full((rows, cols), np.frombuffer(value, f"V{size}")[0])
    srcoff = (base[:, None] + q[None, :] * stride[7])[take]
    flat[take] = mem.read(src, size, srcoff)
    mem.write(out, size, np.arange(rows * cols), flat.ravel())


def pad_rows(mem, t, out, src, p, rows, value):
    _pad(mem, t, out, src, p, rows, _PAD.unpack(p)[7], value)


def pad_elems(mem, t, out, src, p, n, value):
    cols = _PAD.unpack(p)[7]
    _pad(mem, t, out, src, p, n // cols, cols, value)


KERNELS = {f.__name__: f for f in (gather_scalar, gather_rows, gather_general, gather_split,
                                   gather_chunks, gather_place, scatter_scalar,
                                   scatter_add, scatter_l2_normal,
                                   scatter_general, copy_rows, copy_elems, pad_rows,
                                   pad_elems)}


def run(mem: Memory, launch) -> None:
    entry, targs = re.match(r"tf::(\w+)(?:<(.*)>)?$", launch.expression).groups()
    targs = [a.strip() for a in re.split(r",\s*(?![^<]*>)", targs)] if targs else []
    KERNELS[entry](mem, targs, *launch.args)
