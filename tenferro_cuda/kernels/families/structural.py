"""ptx/structural.cu: triangular masks (tril / triu), instantiated per element size."""

from ..registry import Entry, Family
from .permute import INDEX, STORAGE


def tri_expression(size: int, index: str) -> str:
    return f"tf::tri_copy<{STORAGE[size]}, {index}>"


FAMILY = Family(
    "structural",
    "structural.cu",
    (Entry("tri_copy", lambda: [(STORAGE[s], i) for s in STORAGE for i in INDEX]),),
)
