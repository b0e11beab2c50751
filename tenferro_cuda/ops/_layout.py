"""Host-side layout helpers shared by the op families (pure Python, no device).

``coalesce`` merges adjacent axes that are contiguous with each other in *every* operand
and drops extent-1 axes, so kernels index over the fewest axes (a transposed matrix stays
rank 2, a contiguous block becomes rank 1). Overlap of outputs with inputs is judged in
``shapes/aliasing.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..kernels.args import layout_bytes
from ..tensor import _Strided

U32_LIMIT = 1 << 31  # i + grid stride stays below 2^32


def coalesce(shape: Sequence[int], *strides: Sequence[int]):
    """(shape, [strides...]) with mergeable axes merged and extent-1 axes dropped."""
    dims = [i for i, s in enumerate(shape) if s != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for i in dims:
        if out_shape and all(st[-1] == s[i] * shape[i] for st, s in zip(out_strides, strides)):
            out_shape[-1] *= shape[i]
            for st, s in zip(out_strides, strides):
                st[-1] = s[i]
        else:
            out_shape.append(shape[i])
            for st, s in zip(out_strides, strides):
                st.append(s[i])
    return tuple(out_shape), [tuple(st) for st in out_strides]


def index_type(n: int) -> str:
    return "tf::u32" if n < U32_LIMIT else "tf::u64"


def layouts_for(shape: Sequence[int], *views: _Strided) -> tuple[tuple[int, ...], list[bytes]]:
    """Coalesced shape and one packed tf::Layout per view (offsets in elements)."""
    cshape, cstrides = coalesce(shape, *(v.strides for v in views))
    return cshape, [layout_bytes(cshape, st, v.offset) for st, v in zip(cstrides, views)]
