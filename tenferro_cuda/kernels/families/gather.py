"""ptx/gather.cu: StableHLO gather, instantiated per storage unit (gather moves bits).

``gather_scalar`` (one element per window) and ``gather_rows`` (contiguous windows) are the
fast paths; ``gather_general`` serves any geometry, with a 32- or 64-bit linear index.
``gather_split``/``gather_chunks``/``gather_place`` are the scalar gather in three passes for
dense reads of tables much larger than L2 (4-, 8- and 16-byte units).
"""

from ..registry import Entry, Family

UNITS = ("tf::u8", "unsigned short", "tf::u32", "tf::u64", "tf::b128")
UNIT_OF_SIZE = dict(zip((1, 2, 4, 8, 16), UNITS))
INDEX = ("tf::u32", "tf::u64")
PART_UNITS = ("tf::u32", "tf::u64", "tf::b128")

FAMILY = Family(
    "gather",
    "gather.cu",
    (
        Entry("gather_scalar", lambda: [(u,) for u in UNITS]),
        Entry("gather_rows", lambda: [(u,) for u in UNITS]),
        Entry("gather_general", lambda: [(u, i) for u in UNITS for i in INDEX]),
        Entry("gather_split", lambda: [(u,) for u in PART_UNITS]),
        Entry("gather_chunks", lambda: [(u,) for u in PART_UNITS]),
        Entry("gather_place", lambda: [(u,) for u in PART_UNITS]),
    ),
)
