"""ptx/dot_int.cu: the integer dot_general (tiled strided batched GEMM, wrapping)."""

from ...dtypes import ALL_DTYPES
from ..registry import Entry, Family

INT_DTYPES = tuple(d for d in ALL_DTYPES if d.is_integer)

FAMILY = Family(
    "dot_int",
    "dot_int.cu",
    (Entry("dot_int", lambda: [(d.ctype,) for d in INT_DTYPES]),),
)
