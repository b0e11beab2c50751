"""ptx/dot_int.cu: the integer dot_general (tiled strided batched GEMM, wrapping)."""

from ...dtypes import DType
from ..registry import Entry, Family

INT_DTYPES = (DType.INT8, DType.UINT8, DType.INT32, DType.INT64)

FAMILY = Family(
    "dot_int",
    "dot_int.cu",
    (Entry("dot_int", lambda: [(d.ctype,) for d in INT_DTYPES]),),
)
