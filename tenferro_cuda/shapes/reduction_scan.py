"""How a cumulative op runs: the rows of the problem, then the kernel passes of
ptx/scan.cu. Pure Python, and a function of the shape and strides alone (not of the
device), so that a result has the same bits on every GPU.

``rows_of`` splits the input and output views at the axis: the other axes are the rows
(coalesced over both views, with their offsets), the axis has ``n`` elements and a stride
in each view; ``reverse`` negates both strides from the far end.

``plan_scan`` picks a kernel:

- ``scan_rows`` when the axis is the most inner one of the input and longer than
  ``SHORT``: segments of 1..8 warps own tiles of ``32 * seg * ITEMS`` elements; when the
  rows give at least ``CHAIN_WARPS`` warps, a segment owns a whole row and scans its
  tiles in order (``chain``: one pass);
- ``scan_cols`` otherwise: a thread per (row, chunk), adjacent threads on adjacent rows.

A row of several pieces (tiles or chunks) is scanned as *reduce, scan, scan*: a pass
totals every piece into a partials buffer (``Totals``: the partial dtype, as the
reductions'), the totals are scanned in place by the same planner (recursively), and a
last pass scans every piece starting from the scanned total of the pieces before it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .reduction_plan import Frag, coalesce

ITEMS = 8  # TF_SCAN_ITEMS in ptx/scan.cu
SHORT = 16  # rows of at most this many elements go to the column kernel
TARGET_THREADS = 1 << 17  # scan_cols: threads (rows x chunks) to aim for
MIN_ROWS = 64  # scan_cols: fewest elements one chunk folds
CHAIN_WARPS = 4096  # scan_rows: rows x warps from which a segment scans a whole row
GRID_CAP = 1 << 20
U32_SAFE = 1 << 31


@dataclass(frozen=True)
class Rows:
    """The rows of a scan: input and output fragments of the other axes (their offsets
    included), the axis extent and strides."""

    rin: Frag
    rout: Frag
    n: int
    st_in: int
    st_out: int

    @property
    def m(self) -> int:
        return self.rin.size


@dataclass(frozen=True)
class Totals:
    """A partials buffer of ``m * pieces`` elements: piece t of row r at
    ``r * rs + t * ts``."""

    size: int
    rs: int
    ts: int


@dataclass(frozen=True)
class ScanPass:
    """One launch. ``src``/``dst`` name buffers: ``"in"``, ``"out"`` or a level of
    totals (0 = the first, whose scan gives the carries of the last pass); ``carry`` and
    ``totals`` are levels too (None: none)."""

    kernel: str  # "rows" or "cols"
    rows: Rows
    pieces: int  # tiles (rows) or chunks (cols) per row
    chunk: int  # cols: elements per chunk; rows: elements per tile
    seg: int  # rows: warps per segment
    chain: bool  # rows: a segment scans its row's tiles in order (one pass)
    src: object
    dst: object  # None for a totalling pass
    carry: int | None
    totals: int | None
    grid: tuple[int, int]
    block: tuple[int, int]
    index: str


def rows_of(shape, in_strides, in_offset: int, out_strides, out_offset: int, axis: int,
            reverse: bool) -> Rows:
    keep = [i for i in range(len(shape)) if i != axis]
    kshape, (si, so) = coalesce([shape[i] for i in keep], [in_strides[i] for i in keep],
                                [out_strides[i] for i in keep])
    n, sti, sto = shape[axis], in_strides[axis], out_strides[axis]
    if reverse:
        in_offset += (n - 1) * sti
        out_offset += (n - 1) * sto
        sti, sto = -sti, -sto
    return Rows(Frag(kshape, si, in_offset), Frag(kshape, so, out_offset), n, sti, sto)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2ceil(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _index(*sizes: int) -> str:
    return "tf::u32" if max(sizes) + 256 * GRID_CAP < U32_SAFE else "tf::u64"


def plan_scan(rows: Rows) -> tuple[list[ScanPass], list[Totals]]:
    """The passes over a non-empty problem and the totals buffers they use."""
    levels: list[Totals] = []
    passes = _plan(rows, "in", "out", levels)
    return passes, levels


def _plan(rows: Rows, src, dst, levels: list[Totals]) -> list[ScanPass]:
    m, n = rows.m, rows.n
    sk = min((abs(s) for s in rows.rin.strides), default=None)
    if n > SHORT and (sk is None or abs(rows.st_in) <= sk):
        seg = min(8, _pow2ceil(_cdiv(n, 32 * ITEMS)))
        tile = 32 * seg * ITEMS
        pieces = _cdiv(n, tile)
        per_block = 8 // seg
        chain = pieces > 1 and m * seg >= CHAIN_WARPS
        items = m if chain else m * pieces
        grid = (min(GRID_CAP, _cdiv(items, per_block)), 1)
        kernel, chunk, block = "rows", tile, (256, 1)
        index = _index(n + tile, m * pieces + 8)
    else:
        pieces = max(1, min(_cdiv(TARGET_THREADS, m), n // MIN_ROWS))
        chunk = _cdiv(n, pieces)
        pieces = _cdiv(n, chunk)
        bx = min(256, _pow2ceil(m))
        by = min(256 // bx, _pow2ceil(pieces))
        kernel, seg, block, chain = "cols", 1, (bx, by), False
        grid = (min(GRID_CAP, _cdiv(m, bx)), _cdiv(pieces, by))
        index = _index(n + chunk, m)

    def launch(src_, dst_, carry, totals) -> ScanPass:
        return ScanPass(kernel, rows, pieces, chunk, seg, chain, src_, dst_, carry, totals,
                        grid, block, index)

    if pieces == 1 or chain:
        return [launch(src, dst, None, None)]
    level = len(levels)
    # rows: totals [m, pieces] scanned along their axis 1; cols: [pieces, m] along axis 0
    rs, ts = (pieces, 1) if kernel == "rows" else (1, m)
    levels.append(Totals(m * pieces, rs, ts))
    kept = Frag((m,), (rs,)) if m > 1 else Frag((), ())
    inner = Rows(kept, kept, pieces, ts, ts)
    return ([launch(src, None, None, level)] + _plan(inner, level, level, levels)
            + [launch(src, dst, level, None)])
