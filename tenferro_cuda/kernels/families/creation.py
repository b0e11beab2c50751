"""ptx/creation.cu: iota, one instantiation per (numeric dtype, index type)."""

from ...shapes.creation import IOTA_DTYPES
from ..registry import Entry, Family

INDEX = ("tf::u32", "tf::u64")

FAMILY = Family(
    "creation",
    "creation.cu",
    (Entry("iota", lambda: [(d.ctype, i) for d in IOTA_DTYPES for i in INDEX]),),
)
