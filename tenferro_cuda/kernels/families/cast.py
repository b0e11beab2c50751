"""ptx/cast.cu: the cast projection between every pair of the 15 dtypes, one instantiation
per (target, source), in a compact and a strided form."""

from ...dtypes import ALL_DTYPES
from ...shapes.elementwise import CAST_KINDS
from ..registry import Entry, Family


def instances() -> list[tuple[str, str]]:
    """(``tf::CastOp<target>``, source ctype) for all 225 pairs."""
    return [(CAST_KINDS[to].functor, src.ctype) for to in ALL_DTYPES for src in ALL_DTYPES]


FAMILY = Family(
    "cast",
    "cast.cu",
    (
        Entry("cast_contig", instances),
        Entry("cast_strided", instances),
    ),
)
