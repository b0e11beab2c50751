"""ptx/scan.cu: cumulative sums, products, maxima and minima along one axis.

``scan_rows`` and ``scan_cols`` are instantiated per (operator, dtype) with the input
and output storage (the dtype), the partials' storage (the reductions' partial dtype:
float32 for float16/bfloat16 sums and products, else the dtype) and the index type. A
scan of float16/bfloat16 partials is the float32 instantiation of the same operator.
"""

from ...dtypes import DType
from ..registry import Entry, Family
from .reduce import OP_CTYPE, op_dtypes, partial_dtype

KINDS = ("sum", "prod", "max", "min")
INDEX = ("tf::u32", "tf::u64")


def targs(kind: str, dtype: DType, index: str) -> tuple[str, ...]:
    return (f"{OP_CTYPE[kind]}<{dtype.ctype}>", dtype.ctype, dtype.ctype,
            partial_dtype(kind, dtype).ctype, index)


def _instances() -> list[tuple[str, ...]]:
    return [targs(k, d, i) for k in KINDS for d in op_dtypes(k) for i in INDEX]


FAMILY = Family(
    "scan",
    "scan.cu",
    (Entry("scan_rows", _instances), Entry("scan_cols", _instances)),
)
