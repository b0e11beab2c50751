"""ptx/argreduce.cu: argmax / argmin along one axis.

``arg_reduce`` is instantiated per (operator, dtype) with the pass's input storage type
and the index type: the input dtype itself (the first pass) and, where it differs, the
value type the comparisons use (float for float16/bfloat16, u8 for bool), in which a
split pass stores its partial winners for the next pass.
"""

from ...dtypes import ALL_DTYPES, DType
from ..registry import Entry, Family

KINDS = ("argmax", "argmin")
OP_CTYPE = {"argmax": "tf::ar::ArgMax", "argmin": "tf::ar::ArgMin"}
INDEX = ("tf::u32", "tf::u64")
DTYPES = tuple(d for d in ALL_DTYPES if d.is_bool or d.is_integer or d.is_float)

# C++ value type of the comparisons where it is not the dtype's own type
_VALUE = {DType.FLOAT16: "float", DType.BFLOAT16: "float", DType.BOOL: "tf::u8"}


def value_ctype(dtype: DType) -> str:
    """C++ type of the partial winners' values (``tf::ar::val<T>::type``)."""
    return _VALUE.get(dtype, dtype.ctype)


def value_itemsize(dtype: DType) -> int:
    """Bytes of one partial winner's value."""
    return 4 if dtype in (DType.FLOAT16, DType.BFLOAT16) else dtype.itemsize


def targs(kind: str, dtype: DType, partial_input: bool, index: str) -> tuple[str, ...]:
    src = value_ctype(dtype) if partial_input else dtype.ctype
    return (f"{OP_CTYPE[kind]}<{dtype.ctype}>", src, index)


def _instances() -> list[tuple[str, ...]]:
    out = []
    for kind in KINDS:
        for d in DTYPES:
            for part in ((False, True) if d in _VALUE else (False,)):
                out += [targs(kind, d, part, i) for i in INDEX]
    return out


FAMILY = Family("argreduce", "argreduce.cu", (Entry("arg_reduce", _instances),))
