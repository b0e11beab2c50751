"""ptx/copy.cu: fill and strided copy, instantiated per storage size."""

from ...dtypes import ALL_DTYPES
from ..registry import Entry, Family

STORAGE = {1: "tf::u8", 2: "unsigned short", 4: "tf::u32", 8: "tf::u64", 16: "tf::b128"}
INDEX = ("tf::u32", "tf::u64")

FAMILY = Family(
    "copy",
    "copy.cu",
    (
        Entry("fill", lambda: [(s,) for s in STORAGE.values()]),
        Entry("strided_copy", lambda: [(s, i) for s in STORAGE.values() for i in INDEX]),
        Entry("scale_inplace", lambda: [(d.ctype, i) for d in ALL_DTYPES if d.is_numeric
                                        for i in INDEX]),
    ),
)
