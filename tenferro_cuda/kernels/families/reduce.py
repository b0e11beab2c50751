"""ptx/reduce.cu: the row and column reduction kernels.

Instantiated per (operator, dtype) with the pass's input and output storage types and the
index type: every dtype gets (T -> T) for u32 and u64 indices; float16/bfloat16 sums and
products also get the passes into and out of float32 partials (T -> P for u32 and u64,
P -> T for u32: partial arrays are small). A pass from partials to partials of those is
the float32 instantiation of the same operator. ``and``/``or`` take bool and the integer
dtypes (their partials are the input dtype).
"""

from ...dtypes import ALL_DTYPES, DType
from ..registry import Entry, Family

OPS = ("sum", "prod", "max", "min", "and", "or")
OP_CTYPE = {"sum": "tf::rd::Sum", "prod": "tf::rd::Prod", "max": "tf::rd::Max",
            "min": "tf::rd::Min", "and": "tf::rd::And", "or": "tf::rd::Or"}
INDEX = ("tf::u32", "tf::u64")


def op_dtypes(op: str) -> tuple[DType, ...]:
    """The dtypes ``op`` is defined for (numeric; max/min not complex; and/or bool and
    integers)."""
    if op in ("and", "or"):
        return tuple(d for d in ALL_DTYPES if d.is_bool or d.is_integer)
    return tuple(d for d in ALL_DTYPES
                 if d.is_numeric and not (op in ("max", "min") and d.is_complex))


def partial_dtype(op: str, dtype: DType) -> DType:
    """Storage of per-chunk partials: float32 for float16/bfloat16 sums and products (the
    accumulator), else the input dtype (max/min select exactly; other accumulators narrow
    exactly on the way out)."""
    if dtype in (DType.FLOAT16, DType.BFLOAT16) and op in ("sum", "prod"):
        return DType.FLOAT32
    return dtype


def targs(op: str, dtype: DType, src: DType, dst: DType, index: str) -> tuple[str, ...]:
    return (f"{OP_CTYPE[op]}<{dtype.ctype}>", src.ctype, dst.ctype, index)


def _instances() -> list[tuple[str, ...]]:
    out = []
    for op in OPS:
        for d in op_dtypes(op):
            out += [targs(op, d, d, d, i) for i in INDEX]
            p = partial_dtype(op, d)
            if p is not d:
                out += [targs(op, d, d, p, i) for i in INDEX]
                out.append(targs(op, d, p, d, "tf::u32"))
    return out


FAMILY = Family(
    "reduce",
    "reduce.cu",
    (
        Entry("reduce_rows", _instances),
        Entry("reduce_cols", _instances),
    ),
)
