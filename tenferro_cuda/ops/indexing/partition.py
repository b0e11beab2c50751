"""The scalar gather in three passes for dense reads of a table much larger than L2
(``ptx/gather.cu`` path (d)): when to take it, its scratch and its launches.

A one-pass random gather from such a table costs one DRAM access per element, and the
DRAM's rate of random accesses bounds it (H200: ~550-600 GB/s effective for 2^26 float32
from a 1 GiB table, whatever the kernel). Here the elements are first sorted by table chunk
(an L2-sized part of the table) within blocks of ``rows_per_block`` elements, then the
table is read one chunk at a time, each sector coming from DRAM once and the random reads
hitting L2, then every block puts its values back in order. Measured on the H200 (the
``gather_partition`` experiment, docs/perf-notes.md): 2^26 float32 from 2^28 862-883 GB/s
(one pass 553); 2^24 from 2^28 634 (544); 2^26 from 2^30 582 (540); 2^22 from 2^28 468
(499: slower, hence the density rule). Indices concentrated in one chunk cost the split
pass its shared atomics (2^26 into one 16 MiB chunk: 1.16 ms against the one pass's
0.56 ms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...kernels.families.gather import UNIT_OF_SIZE
from .plan import MAP_CODE, GatherArgs, Launch, scalar_gather, start_map

BLOCK = 256  # PART_BLOCK
CHUNKS_MAX = 512  # PART_CHUNKS_MAX
CHUNK_BYTES_MAX = 16 << 20
ROWS = {4: 4096, 8: 4096, 16: 2048}  # part_rows<S>: elements per split block
BLOCKS_PER_SM = 2048 // BLOCK  # gather_chunks is persistent: one full wave
MIN_TABLE_L2 = 2  # the table spans at least this many L2 sizes
BYTES_PER_INDEX = 64  # at least one element gathered per 64 bytes of table


@dataclass(frozen=True)
class PartitionPlan:
    """Three launches over the result buffer and one scratch buffer (positions, then the
    per-block chunk offsets, then the work counter)."""

    unit: str
    n: int
    blocks: int
    shift: int
    chunks: int
    base: int  # added to every clamped offset: the table starts at operand + (-base) units
    table_ptr: int
    out_ptr: int
    indices_ptr: int
    index_map: bytes
    sms: int

    @property
    def pos_bytes(self) -> int:
        return -(-2 * self.n // 16) * 16

    @property
    def scratch_bytes(self) -> int:
        return self.pos_bytes + 4 * ((self.chunks + 1) * self.blocks + 1)

    def launches(self, scratch: int) -> tuple[Launch, Launch, Launch]:
        pos, offs = scratch, scratch + self.pos_bytes
        counter = offs + 4 * (self.chunks + 1) * self.blocks
        u = self.unit
        return (
            Launch("gather", f"tf::gather_split<{u}>", f"PP{MAP_CODE}qqIIPP",
                   (self.out_ptr, self.indices_ptr, self.index_map, self.base, self.n,
                    self.shift, self.chunks, pos, offs), (self.blocks, 1, 1), BLOCK),
            Launch("gather", f"tf::gather_chunks<{u}>", "PPIIIPP",
                   (self.out_ptr, self.table_ptr, self.shift, self.chunks, self.blocks, offs,
                    counter), (self.sms * BLOCKS_PER_SM, 1, 1), BLOCK),
            Launch("gather", f"tf::gather_place<{u}>", "PPq", (self.out_ptr, pos, self.n),
                   (self.blocks, 1, 1), BLOCK),
        )


def chunk_bytes(l2_bytes: int) -> int:
    """Bytes of table per pass: the largest power of two <= min(L2 / 3, 16 MiB), so that
    the chunk being read and the next one's first reads fit beside the streamed data."""
    cap = min(l2_bytes // 3, CHUNK_BYTES_MAX)
    return 1 << (cap.bit_length() - 1) if cap >= 16 else 0


def table_span(g: GatherArgs) -> tuple[int, int]:
    """(lowest offset, number of units) of the operand elements any index can reach."""
    _, oshape, ost = g.operand
    lo = hi = 0
    for d in g.start_index_map:
        reach = (oshape[d] - 1) * ost[d]
        lo, hi = lo + min(0, reach), hi + max(0, reach)
    return lo, hi - lo + 1


def gather_partition(g: GatherArgs, l2_bytes: int, sms: int) -> PartitionPlan | None:
    """The three-pass plan when it serves ``g`` and should beat one pass, else None: the
    scalar path applies, 4/8/16-byte elements, a table of >= 2 L2 sizes and <= 512 chunks,
    at least one element per 64 bytes of it, and fewer than 2^32 elements."""
    n = math.prod(g.result_shape)
    if n * BYTES_PER_INDEX < MIN_TABLE_L2 * l2_bytes:  # implied by the rules: most leave here
        return None
    item = g.itemsize
    if item not in ROWS or n >= 1 << 32 or not scalar_gather(g):
        return None
    lo, span = table_span(g)
    nbytes = span * item
    chunk = chunk_bytes(l2_bytes)
    if not chunk or nbytes < MIN_TABLE_L2 * l2_bytes or n * BYTES_PER_INDEX < nbytes:
        return None
    chunks = -(-nbytes // chunk)
    if not 2 <= chunks <= CHUNKS_MAX:
        return None
    return PartitionPlan(
        unit=UNIT_OF_SIZE[item], n=n, blocks=-(-n // ROWS[item]),
        shift=(chunk // item).bit_length() - 1, chunks=chunks, base=-lo,
        table_ptr=g.operand[0] + lo * item, out_ptr=g.out_ptr, indices_ptr=g.indices[0],
        index_map=start_map(g, 1), sms=sms)
