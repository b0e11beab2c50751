"""How argmax/argmin run: split the view at the axis, then plan the kernel passes of
``arg_reduce`` (ptx/argreduce.cu). Pure Python.

``split_axis`` gives the kept axes (output order, input strides and offset, coalesced), the
axis extent ``n`` and its stride (any sign: positions are logical, so ties still go to the
first index). ``plan_arg`` picks the lanes of a work item:

- rows (the axis is the most inner one): a group of lanes (1..32) per output, or a whole
  256-thread block per chunk of the axis when there are few outputs over many elements;
- cols (a kept axis is the most inner one): one lane per (chunk, output), adjacent threads
  on adjacent outputs (coalesced), the axis cut into chunks when outputs are too few to
  fill the device.

A split pass writes per-chunk winners ``[nchunks, nout]`` (value and index) that the next
pass reduces along their axis 0; passes plan recursively until one chunk remains. The
winner rule is a total order on (value, index), so the result does not depend on the
chunking (or the device): it is the first index of the maximum.
"""

from __future__ import annotations

from dataclasses import dataclass

from .reduction_plan import GRID_CAP, Frag, coalesce

BLOCK = 256
MIN_CHUNK = 8192  # rows: fewest elements one split chunk of a block covers
BLOCK_GROUP_MIN = 1024  # rows: a block per output from this many elements
MIN_ROWS = 64  # cols: fewest axis positions one split chunk walks
U32_SAFE = 1 << 31


@dataclass(frozen=True)
class ArgPass:
    """One launch of ``arg_reduce`` (see ptx/argreduce.cu for the parameters)."""

    kept: Frag
    n: int
    st: int
    chunk: int
    nchunks: int
    nout: int
    group: int
    blocks: int
    index: str
    src_partial: bool
    dst_partial: bool

    @property
    def nitems(self) -> int:
        return self.nout * self.nchunks


def split_axis(shape, strides, offset: int, axis: int) -> tuple[Frag, int, int]:
    """(kept fragment with the input offset, axis extent, axis stride)."""
    keep = [i for i in range(len(shape)) if i != axis]
    kshape, (kst,) = coalesce([shape[i] for i in keep], [strides[i] for i in keep])
    return Frag(kshape, kst, offset), shape[axis], strides[axis]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def is_rows(kept: Frag, st: int) -> bool:
    """True when lanes should walk the axis (it is the most inner axis)."""
    sk = min((abs(s) for s in kept.strides), default=None)
    sr = abs(st)
    return sk is None or sr == 1 or (sk != 1 and sr <= sk)


def plan_arg(kept: Frag, n: int, st: int, blocks: int,
             src_partial: bool = False) -> list[ArgPass]:
    """The passes over a non-empty input (``n`` >= 1, at least one output); ``blocks``:
    resident 256-thread blocks of the device."""
    nout = kept.size
    if is_rows(kept, st):
        if nout * 32 < blocks * BLOCK and n >= BLOCK_GROUP_MIN:
            group = BLOCK
            nchunks = max(1, min(blocks // nout, n // MIN_CHUNK))
        else:
            group, nchunks = min(32, _pow2ceil(_cdiv(n, 8))), 1
    else:
        group = 1
        nchunks = max(1, min(_cdiv(blocks * BLOCK, nout), n // MIN_ROWS))
    chunk = _cdiv(n, nchunks)
    nchunks = _cdiv(n, chunk)
    items = nout * nchunks
    index = "tf::u32" if max(n, items) + BLOCK * GRID_CAP < U32_SAFE else "tf::u64"
    first = ArgPass(kept, n, st, chunk, nchunks, nout, group,
                    min(GRID_CAP, _cdiv(items * group, BLOCK)), index, src_partial,
                    nchunks > 1)
    if nchunks == 1:
        return [first]
    pshape, (pst,) = coalesce((nout,), (1,))
    return [first] + plan_arg(Frag(pshape, pst), nchunks, nout, blocks, True)
