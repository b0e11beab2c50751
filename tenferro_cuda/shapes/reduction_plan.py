"""How a reduction runs: classify the layout, then plan the kernel passes (pure Python).

``classify`` drops extent-1 axes, splits the view into kept axes (output order, with the
input strides and the compact output strides, coalesced) and reduced axes (negative
strides flipped, sorted outermost first, coalesced). Its innermost reduced axis is a *run*.

``plan_reduce`` picks one of two kernels (ptx/reduce.cu), both correct for any layout:

- rows (``reduce_rows``): the run is the most inner axis (unit stride: reduce the innermost
  contiguous elements). A group of lanes (1..32, or a 256-thread block when there are few
  outputs) reduces each output with 16-byte loads; few outputs over many elements are split
  into chunks, one block each (``nchunks``), whose partials a second, small pass reduces.
- cols (``reduce_cols``): a kept axis is the most inner one (e.g. axis 0 of a matrix).
  Threads own output columns (V adjacent columns per thread, 16-byte loads, when strides
  and offset allow) and walk the reduced rows, coalesced across threads; the rows are split
  into chunks when there are too few columns to fill the device, and a second pass reduces
  the partials (``[nchunks, outer, ncols]``).

Chunk counts follow the device (``Machine``: resident 256-thread blocks) so that a split
first pass is at most one even wave (no tail of late blocks); they depend only on the
shape, strides, offset and device, so the result's bits do not change from run to run.
Partial passes plan recursively until one chunk remains (no atomics anywhere).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BLOCK = 256
MIN_CHUNK = 8192  # rows: fewest elements one split chunk reduces
BLOCK_GROUP_MIN = 1024  # rows: a block per output from this many reduced elements
MIN_ROWS = 64  # cols: fewest rows one split chunk walks
GRID_CAP = 1 << 20
U32_SAFE = 1 << 31  # u32 index math below this many elements (sums of two stay < 2^32)


@dataclass(frozen=True)
class Machine:
    """Resident 256-thread blocks on the device for the row and the column kernel."""

    row_blocks: int
    col_blocks: int


@dataclass(frozen=True)
class Frag:
    """Shape, element strides and element offset of a layout fragment (a tf::Layout)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Problem:
    """A classified reduction: kept axes (input strides and offset, output strides) and
    reduced axes (outermost first, strides >= 0)."""

    kept: Frag
    kept_out: tuple[int, ...]
    red: Frag

    @property
    def path(self) -> str:
        """``rows`` when the run is the most inner axis, else ``cols``."""
        sr = self.red.strides[-1]
        sk = min((abs(s) for s in self.kept.strides), default=None)
        if sk is None or sr == 1 or (sk != 1 and sr <= sk):
            return "rows"
        return "cols"


@dataclass(frozen=True)
class RowPass:
    kept: Frag  # per output: offset_of(kept, o) (input offset included)
    outer: Frag  # reduced axes outside the run
    run: int
    run_stride: int
    total: int
    chunk: int
    nchunks: int
    nout: int
    group: int
    flat: bool
    src_partial: bool
    dst_partial: bool
    index: str
    blocks: int

    @property
    def nitems(self) -> int:
        return self.nout * self.nchunks

    @property
    def out_size(self) -> int:
        return self.nitems


@dataclass(frozen=True)
class ColPass:
    oin: Frag  # outer kept axes: input strides and input offset
    oout: tuple[int, ...]  # outer kept axes: output strides
    outer: Frag  # reduced axes outside the run of rows
    run: int
    rs: int
    ncols: int
    col_in: int
    col_out: int
    total: int
    chunk: int
    nchunks: int
    vec: bool
    nitems: int
    plane: int
    src_partial: bool
    dst_partial: bool
    index: str
    block: tuple[int, int]
    grid: tuple[int, int]

    @property
    def out_size(self) -> int:
        return self.nchunks * self.plane if self.dst_partial else 0


@dataclass(frozen=True)
class Plan:
    """``kind``: empty (nothing to compute), fill (zero elements reduced), copy (nothing
    reduced), rows or cols (``passes``, the last one writing the result)."""

    kind: str
    passes: tuple = ()


def _pow2ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _index(n: int) -> str:
    return "tf::u32" if n < U32_SAFE else "tf::u64"


def classify(shape, strides, offset: int, axes) -> Problem:
    """Split a view into coalesced kept and reduced fragments (see module docstring)."""
    axes = set(axes)
    kept_ax = [i for i in range(len(shape)) if i not in axes]
    kshape = tuple(shape[i] for i in kept_ax)
    out_strides, acc = [0] * len(kshape), 1
    for i in range(len(kshape) - 1, -1, -1):
        out_strides[i] = acc
        acc *= kshape[i]
    kshape_c, (kin, kout) = coalesce(kshape, [strides[i] for i in kept_ax], out_strides)
    red = []
    for i in sorted(axes):
        n, st = shape[i], strides[i]
        if n > 1 and st < 0:
            offset += (n - 1) * st
            st = -st
        red.append((n, st))
    red.sort(key=lambda t: -t[1])
    rshape, (rstrides,) = coalesce([n for n, _ in red], [st for _, st in red])
    return Problem(Frag(kshape_c, kin, offset), kout, Frag(rshape, rstrides))


def plan_reduce(prob: Problem, itemsize: int, partial_itemsize: int, m: Machine,
                aligned: bool = True) -> Plan:
    """The passes of a classified reduction over a non-empty input and output.

    ``aligned``: the input buffer starts on a 16-byte boundary (pool buffers do; an adopted
    foreign buffer may not), which the column kernel's vector loads rely on."""
    if not prob.red.shape:
        return Plan("copy")
    red = prob.red
    outer = Frag(red.shape[:-1], red.strides[:-1])
    size = prob.kept.size * red.size
    if prob.path == "rows":
        return Plan("rows", tuple(_row_passes(prob.kept, outer, red.shape[-1], red.strides[-1],
                                              itemsize, partial_itemsize, m, size, False)))
    kin, kout = prob.kept, prob.kept_out
    c = max(i for i, s in enumerate(kin.strides) if abs(s) == min(map(abs, kin.strides)))
    rest = [i for i in range(len(kin.shape)) if i != c]
    oin = Frag(tuple(kin.shape[i] for i in rest), tuple(kin.strides[i] for i in rest),
               kin.offset)
    geo = _ColGeometry(oin, tuple(kout[i] for i in rest), outer, red.shape[-1],
                       red.strides[-1], kin.shape[c], kin.strides[c], kout[c])
    return Plan("cols", tuple(_col_passes(geo, itemsize, partial_itemsize, m, size, False,
                                          aligned)))


def _row_passes(kept: Frag, outer: Frag, run: int, run_stride: int, itemsize: int,
                pitem: int, m: Machine, size: int, src_partial: bool) -> list:
    nout, total = kept.size, run * outer.size
    if nout * 32 < m.row_blocks * BLOCK and total >= BLOCK_GROUP_MIN:
        group = BLOCK
        nchunks = max(1, min(m.row_blocks // nout, total // MIN_CHUNK))  # one wave
    else:
        group, nchunks = min(32, _pow2ceil(_cdiv(total, 8))), 1
    chunk = total
    if nchunks > 1:  # chunk starts stay 16-byte aligned relative to the run
        chunk = _cdiv(_cdiv(total, nchunks), 64) * 64
        nchunks = _cdiv(total, chunk)
    split = nchunks > 1
    blocks = min(GRID_CAP, _cdiv(nout * nchunks * group, BLOCK))
    first = RowPass(kept, outer, run, run_stride, total, chunk, nchunks, nout, group,
                    outer.size > 1 and run < group, src_partial, split,
                    _index(max(size, nout * nchunks)), blocks)
    if not split:
        return [first]
    pshape, (pstrides,) = coalesce((nout,), (nchunks,))
    return [first] + _row_passes(Frag(pshape, pstrides), Frag((), ()), nchunks, 1, pitem,
                                 pitem, m, nout * nchunks, True)


@dataclass(frozen=True)
class _ColGeometry:
    oin: Frag
    oout: tuple[int, ...]
    outer: Frag
    run: int
    rs: int
    ncols: int
    col_in: int
    col_out: int

    def vectorizable(self, itemsize: int) -> bool:
        v = 16 // itemsize
        strides = self.oin.strides + self.outer.strides + (self.rs, self.oin.offset)
        return v > 1 and self.col_in == 1 and self.ncols % v == 0 and \
            all(s % v == 0 for s in strides)


def _col_passes(g: _ColGeometry, itemsize: int, pitem: int, m: Machine, size: int,
                src_partial: bool, aligned: bool = True) -> list:
    total = g.run * g.outer.size
    vec = aligned and g.vectorizable(itemsize)
    nitems = g.oin.size * (g.ncols // (16 // itemsize) if vec else g.ncols)
    bx = min(BLOCK, _pow2ceil(nitems))
    gx = min(_cdiv(nitems, bx), GRID_CAP)
    wave = max(1, m.col_blocks // gx) * (BLOCK // bx)  # chunks that fit in one wave
    nchunks = max(1, min(wave, total // MIN_ROWS))
    chunk = _cdiv(total, nchunks)
    nchunks = _cdiv(total, chunk)
    split = nchunks > 1
    by = min(BLOCK // bx, _pow2ceil(nchunks))
    plane = g.oin.size * g.ncols if split else 0
    pstrides = tuple(st * g.ncols for st in _compact(g.oin.shape))
    oout, col_out = (pstrides, 1) if split else (g.oout, g.col_out)
    first = ColPass(g.oin, oout, g.outer, g.run, g.rs, g.ncols, g.col_in, col_out, total,
                    chunk, nchunks, vec, nitems, plane, src_partial, split,
                    _index(max(size, nchunks * plane)), (bx, by), (gx, _cdiv(nchunks, by)))
    if not split:
        return [first]
    nxt = _ColGeometry(Frag(g.oin.shape, pstrides), g.oout, Frag((), ()), nchunks, plane,
                       g.ncols, 1, g.col_out)
    return [first] + _col_passes(nxt, pitem, pitem, m, nchunks * plane, True)


def coalesce(shape, *strides):
    """(shape, [strides...]) with extent-1 axes dropped and adjacent axes merged where every
    stride list allows it (as ``ops._layout.coalesce``; shapes/ does not import ops/)."""
    out_shape: list[int] = []
    out: list[list[int]] = [[] for _ in strides]
    for i, n in enumerate(shape):
        if n == 1:
            continue
        if out_shape and all(o[-1] == st[i] * n for o, st in zip(out, strides)):
            out_shape[-1] *= n
            for o, st in zip(out, strides):
                o[-1] = st[i]
        else:
            out_shape.append(n)
            for o, st in zip(out, strides):
                o.append(st[i])
    return tuple(out_shape), [tuple(o) for o in out]


def _compact(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= shape[i]
    return tuple(out)
