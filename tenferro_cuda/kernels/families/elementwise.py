"""ptx/elementwise.cu: elementwise and analytic kernels, one instantiation per (op functor,
primary dtype) that ``shapes/elementwise.KINDS`` accepts, in a compact, a strided and a
broadcast-rows form (rank-3 layouts with a unit-stride or broadcast innermost axis), and a
small form (one thread per element, for short compact runs)."""

from ...dtypes import ALL_DTYPES
from ...shapes.elementwise import KINDS
from ..registry import Entry, Family


def instances() -> list[tuple[str, str]]:
    """(functor, primary ctype) for every kind and every dtype it accepts."""
    return [(k.functor, d.ctype) for k in KINDS.values() for d in ALL_DTYPES
            if k.instantiable(d)]


FAMILY = Family(
    "elementwise",
    "elementwise.cu",
    (
        Entry("ew_contig", instances),
        Entry("ew_strided", instances),
        Entry("ew_bcast", instances),
        Entry("ew_small", instances),
    ),
)
