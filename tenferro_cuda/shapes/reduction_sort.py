"""How a sort runs (pure Python): the kernels of ptx/sort.cu for a view, an axis and a
device.

- Rows of at most ``SMALL`` elements: ``sort_small`` reads the view as it is (any
  strides) and writes the compact result; a block sorts ``2^logt`` slots, rows padded to
  ``2^logp`` slots (``SmallPlan``).
- Longer rows: an LSD radix sort, one pass per byte of the element (``RadixPlan``), over
  compact ``[m, n]`` keys: the input itself when it is compact with the axis last, else a
  compact copy with the axis moved last (the result is moved back the same way). Each
  pass is a histogram, a scan of the counts (``counts_rows``) and a scatter. A row is cut
  into ``bpr`` spans of whole tiles, so that about two waves of blocks cover the input.

The passes move the keys (the elements' bits) between the output and one scratch buffer
and, when the indices are asked for, 32-bit positions between one scratch buffer and the
first half of the int64 indices (the last pass widens them into the indices):
``key_buffers`` and ``index_buffers`` say which buffer each pass writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .reduction_plan import Frag, coalesce
from .reduction_scan import Rows

SMALL = 2048  # TF_SORT_SMALL in ptx/sort.cu
MIN_SLOTS = 512  # sort_small: slots of a block at least (several short rows per block)
GRID_CAP = 1 << 20
U32_SAFE = 1 << 31


@dataclass(frozen=True)
class SmallPlan:
    rin: Frag  # the other axes: input strides and offset
    rout: Frag  # the other axes: compact output strides
    n: int
    st_in: int
    st_out: int
    m: int
    logp: int
    logt: int
    grid: int
    index: str


@dataclass(frozen=True)
class RadixPlan:
    m: int
    n: int
    passes: int
    tile: int
    span: int
    bpr: int
    grid: int

    @property
    def nitems(self) -> int:
        return self.m * self.bpr

    def counts_rows(self) -> Rows:
        """The scan of the digit counts: every row's ``256 * bpr`` counts, in place."""
        width = 256 * self.bpr
        kept = Frag((self.m,), (width,)) if self.m > 1 else Frag((), ())
        return Rows(kept, kept, width, 1, 1)

    def key_buffers(self) -> list[str]:
        """The buffer pass p writes: ``"out"`` (the last pass) or ``"scratch"``."""
        return ["out" if (self.passes - p) % 2 == 0 else "scratch"
                for p in range(1, self.passes + 1)]

    def index_buffers(self) -> list[str]:
        """The positions buffer pass p writes: ``"indices"`` (the last, int64), else
        ``"scratch"`` or ``"low"`` (the first half of the int64 indices, read by a pass
        that does not write the indices)."""
        return ["indices" if p == self.passes else
                ("scratch" if (self.passes - p) % 2 else "low")
                for p in range(1, self.passes + 1)]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def radix_tile(itemsize: int) -> int:
    """Elements of one radix_scatter tile: 256 threads x TF radix_items."""
    return 256 * (8 if itemsize == 8 else 16)


def plan_small(shape, in_strides, in_offset: int, out_strides, axis: int) -> SmallPlan:
    keep = [i for i in range(len(shape)) if i != axis]
    kshape, (si, so) = coalesce([shape[i] for i in keep], [in_strides[i] for i in keep],
                                [out_strides[i] for i in keep])
    n = shape[axis]
    m = math.prod(kshape)
    logp = max(0, (n - 1).bit_length())
    logt = max(logp, MIN_SLOTS.bit_length() - 1)
    rows_per_block = 1 << (logt - logp)
    grid = min(GRID_CAP, _cdiv(m, rows_per_block))
    index = "tf::u32" if m + rows_per_block * GRID_CAP < U32_SAFE else "tf::u64"
    return SmallPlan(Frag(kshape, si, in_offset), Frag(kshape, so), n, in_strides[axis],
                     out_strides[axis], m, logp, logt, grid, index)


def plan_radix(m: int, n: int, itemsize: int, resident_blocks: int) -> RadixPlan:
    """``resident_blocks``: radix_scatter blocks the device holds at once."""
    tile = radix_tile(itemsize)
    tiles = _cdiv(n, tile)
    bpr = max(1, min(tiles, _cdiv(2 * resident_blocks, m)))
    span = tile * _cdiv(tiles, bpr)
    bpr = _cdiv(n, span)
    return RadixPlan(m, n, itemsize, tile, span, bpr, min(GRID_CAP, m * bpr))
