"""ptx/slicing.cu: strided view copies (slice, dynamic slices, concatenate, reverse) and
pad, instantiated per storage unit."""

from ..registry import Entry, Family
from .gather import INDEX, UNITS

FAMILY = Family(
    "slicing",
    "slicing.cu",
    (
        Entry("copy_rows", lambda: [(u,) for u in UNITS]),
        Entry("copy_elems", lambda: [(u, i) for u in UNITS for i in INDEX]),
        Entry("pad_rows", lambda: [(u,) for u in UNITS]),
        Entry("pad_elems", lambda: [(u, i) for u in UNITS for i in INDEX]),
    ),
)
