"""ptx/sort.cu: the stable sort along one axis.

The kernels are instantiated per key policy (``tf::st`` in ptx/sort.cu), one per distinct
(width, kind) of the ordered dtypes: bool and uint8 share ``Unsigned<u8>``. ``sort_small``
also takes the index type; the radix kernels count in 32 bits (rows of fewer than 2^31
elements, fewer than 2^31 blocks).
"""

from ...dtypes import ALL_DTYPES, DType
from ..registry import Entry, Family

INDEX = ("tf::u32", "tf::u64")
DTYPES = tuple(d for d in ALL_DTYPES if d.is_bool or d.is_integer or d.is_float)
_KEY = {1: "tf::u8", 2: "unsigned short", 4: "tf::u32", 8: "tf::u64"}
# The exponent mask of each float dtype (+inf's bits)
_EXPONENT = {DType.FLOAT16: 0x7C00, DType.BFLOAT16: 0x7F80, DType.FLOAT32: 0x7F800000,
             DType.FLOAT64: 0x7FF0000000000000}


def policy(dtype: DType) -> str:
    """The key policy of ``dtype``, e.g. ``tf::st::Float<tf::u32, 0x7f800000ull>``."""
    k = _KEY[dtype.itemsize]
    if dtype in _EXPONENT:
        return f"tf::st::Float<{k}, {_EXPONENT[dtype]:#x}ull>"
    if dtype.is_signed_integer:
        return f"tf::st::Signed<{k}>"
    return f"tf::st::Unsigned<{k}>"


def _policies() -> list[str]:
    return list(dict.fromkeys(policy(d) for d in DTYPES))


FAMILY = Family(
    "sort",
    "sort.cu",
    (
        Entry("sort_small", lambda: [(p, i) for p in _policies() for i in INDEX]),
        Entry("radix_hist", lambda: [(p,) for p in _policies()]),
        Entry("radix_scatter", lambda: [(p,) for p in _policies()]),
    ),
)
