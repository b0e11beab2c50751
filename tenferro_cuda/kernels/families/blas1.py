"""ptx/blas1.cu: vdot / norm_squared (flat two-pass reductions) and axpby."""

from ...dtypes import ALL_DTYPES
from ..registry import Entry, Family

NUMERIC = tuple(d for d in ALL_DTYPES if d.is_numeric)
INDEX = ("tf::u32", "tf::u64")
MAPS = ("tf::bl::Vdot", "tf::bl::NormSq")


def map_arg(name: str, ctype: str) -> str:
    """The map template argument, e.g. ``tf::bl::Vdot<float>``."""
    return f"{name}<{ctype}>"


def _maps() -> list[tuple[str, ...]]:
    return [(map_arg(m, d.ctype),) for m in MAPS for d in NUMERIC]


FAMILY = Family(
    "blas1",
    "blas1.cu",
    (
        Entry("flat_partials", _maps),
        Entry("flat_finish", _maps),
        Entry("axpby_contig", lambda: [(d.ctype,) for d in NUMERIC]),
        Entry("axpby_strided", lambda: [(d.ctype, i) for d in NUMERIC for i in INDEX]),
    ),
)
