"""Shape inference and argument validation, pure Python (no device): one module per op
family, plus the checks they share here. Every function raises ValidationError (or an
UnsupportedDType* error) *before* anything is allocated or launched.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from ..dtypes import DType
from ..errors import UnsupportedDTypeError, ValidationError

MAX_RANK = 8


def check_rank(shape: Sequence[int], op: str, limit: int = MAX_RANK) -> None:
    if len(shape) > limit:
        raise ValidationError(f"rank {len(shape)} exceeds the supported maximum of {limit}",
                              op=op, kind="rank_mismatch")


def normalize_axes(axes: Sequence[int], rank: int, op: str, *, allow_negative: bool = False,
                   what: str = "axes") -> tuple[int, ...]:
    """Axes as ints in range(rank), no duplicates (ValidationError otherwise)."""
    try:
        out = [operator.index(a) for a in axes]
    except TypeError:
        raise ValidationError(f"{what} must be a sequence of ints (got {axes!r})",
                              op=op) from None
    for i, a in enumerate(out):
        if allow_negative and -rank <= a < 0:
            out[i] = a + rank
        elif not 0 <= a < rank:
            raise ValidationError(f"{what}: axis {a} is out of range for rank {rank}",
                                  op=op, kind="axis_out_of_bounds")
    if len(set(out)) != len(out):
        raise ValidationError(f"{what}: duplicate axes in {tuple(axes)}", op=op,
                              kind="duplicate_axis")
    return tuple(out)


def check_permutation(perm: Sequence[int], rank: int, op: str) -> tuple[int, ...]:
    p = normalize_axes(perm, rank, op, what="perm")
    if len(p) != rank:
        raise ValidationError(f"perm {tuple(perm)} must list each of the {rank} axes once",
                              op=op, kind="rank_mismatch")
    return p


def same_dtype(op: str, *dtypes: DType) -> DType:
    first = dtypes[0]
    for d in dtypes[1:]:
        if d is not first:
            raise ValidationError(
                f"dtype mismatch: {', '.join(x.value for x in dtypes)} (no implicit "
                "promotion; use convert or cast)", op=op, kind="dtype_mismatch")
    return first


def same_shape(op: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    first = tuple(shapes[0])
    for s in shapes[1:]:
        if tuple(s) != first:
            raise ValidationError(
                f"shape mismatch: {' vs '.join(str(tuple(x)) for x in shapes)}", op=op,
                kind="shape_mismatch")
    return first


def require_dtype(dtype: DType, op: str, ok: bool, what: str) -> None:
    if not ok:
        raise UnsupportedDTypeError(f"{op} is not defined for {dtype.value} ({what})", op=op)


def check_out(out_shape: Sequence[int], out_dtype: DType, shape: Sequence[int],
              dtype: DType, op: str) -> None:
    """A caller-owned output must have exactly the result's shape and dtype."""
    if tuple(out_shape) != tuple(shape):
        raise ValidationError(f"out has shape {tuple(out_shape)}; the result has shape "
                              f"{tuple(shape)}", op=op, kind="shape_mismatch")
    if out_dtype is not dtype:
        raise ValidationError(f"out has dtype {out_dtype.value}; the result has dtype "
                              f"{dtype.value}", op=op, kind="dtype_mismatch")
