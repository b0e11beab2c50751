"""ptx/scatter.cu: StableHLO scatter with the add / max / min / replace combiners.

Arithmetic combiners are instantiated per dtype (``add`` for every numeric dtype,
``max``/``min`` for integer and real floating dtypes); ``replace`` moves bits and is
instantiated per storage unit (plain store, or the claim/commit pair that makes duplicate
windows deterministic). ``OPS`` maps a combiner pass to the kernel's ``OP`` argument.
``scatter_add`` serves ``add`` on the scalar geometry (so ``scatter_scalar`` has no add
instantiations); ``scatter_l2_normal`` demotes its evict_last L2 lines afterwards.
"""

from ...dtypes import ALL_DTYPES
from ..registry import Entry, Family
from .gather import INDEX, UNITS

OPS = {"add": 0, "max": 1, "min": 2, "store": 3, "claim": 4, "commit": 5}
CLAIM_UNIT = "tf::u8"  # the claim pass reads no update; it is instantiated once
ADD_VEC = 4  # ptx/scatter.cu: consecutive updates per vector load in scatter_add


def add_vectors(itemsize: int) -> int:
    """Vectors of ``ADD_VEC`` updates per thread in scatter_add (``add_tile<T>::un``)."""
    return 4 if itemsize <= 4 else (2 if itemsize == 8 else 1)


def _pairs():
    out = [(d.ctype, str(OPS["add"])) for d in ALL_DTYPES if d.is_numeric]
    for op in ("max", "min"):
        out += [(d.ctype, str(OPS[op])) for d in ALL_DTYPES
                if d.is_integer or d.is_float]
    out += [(u, str(OPS[op])) for op in ("store", "commit") for u in UNITS]
    out.append((CLAIM_UNIT, str(OPS["claim"])))
    return out


FAMILY = Family(
    "scatter",
    "scatter.cu",
    (
        Entry("scatter_scalar", lambda: [p for p in _pairs() if p[1] != str(OPS["add"])]),
        Entry("scatter_add", lambda: [(d.ctype,) for d in ALL_DTYPES if d.is_numeric]),
        Entry("scatter_l2_normal", lambda: [()]),
        Entry("scatter_general", lambda: [(t, op, i) for t, op in _pairs() for i in INDEX]),
    ),
)
