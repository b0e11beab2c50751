"""ptx/permute.cu: row and tiled permutation copies, instantiated per element size.

``ROW_VECTORS[size]`` lists the vector widths (elements per access) of ``permute_rows``
for an element of ``size`` bytes (16-byte accesses down to one element); ``TILE[size]``
is the (V, T) of ``permute_tiled``: V elements per vector access, T x T elements a tile.
"""

from ..registry import Entry, Family

STORAGE = {1: "tf::u8", 2: "unsigned short", 4: "tf::u32", 8: "tf::u64", 16: "tf::b128"}
INDEX = ("tf::u32", "tf::u64")
ROW_VECTORS = {size: tuple(v for v in (16, 8, 4, 2, 1) if v * size <= 16) for size in STORAGE}
TILE = {1: (4, 64), 2: (4, 64), 4: (4, 64), 8: (2, 32), 16: (1, 32)}


def row_expression(size: int, vector: int, index: str) -> str:
    return f"tf::permute_rows<{STORAGE[size]}, {vector}, {index}>"


def tiled_expression(size: int, index: str) -> str:
    v, t = TILE[size]
    return f"tf::permute_tiled<{STORAGE[size]}, {v}, {t}, {index}>"


FAMILY = Family(
    "permute",
    "permute.cu",
    (
        Entry("permute_rows", lambda: [(STORAGE[s], str(v), i) for s in STORAGE
                                       for v in ROW_VECTORS[s] for i in INDEX]),
        Entry("permute_tiled", lambda: [(STORAGE[s], str(TILE[s][0]), str(TILE[s][1]), i)
                                        for s in STORAGE for i in INDEX]),
    ),
)
