"""Validation and shape inference of the single-axis reductions (pure Python):
``argmax``/``argmin``, the cumulative ops ``cumsum``/``cumprod``/``cummax``/``cummin`` and
``sort``.

``axis`` is one int (not a bool) in ``[-rank, rank)``; a negative axis counts from the
end, as in numpy and ``jax.lax.sort``. Dtypes:

- argmax/argmin and sort: bool (False < True), the integer dtypes and the real floats;
  complex numbers are not ordered (``UnsupportedDTypeError``);
- cumsum/cumprod: every numeric dtype (not bool), as ``reduce_sum``/``reduce_prod``;
  cummax/cummin: integers and real floats, as ``reduce_max``/``reduce_min``.

argmax/argmin remove the axis and return int64 indices; an axis of extent 0 has no
maximum (``ValidationError``). The cumulative ops and sort keep the shape and dtype
(sort's indices are int64 of the same shape). A sorted axis holds fewer than 2^31
elements (the positions are 32-bit while the passes run).
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np

from ..dtypes import DType
from ..errors import ValidationError
from . import check_rank, require_dtype
from .reduction import check_reduce_dtype

__all__ = ["parse_axis", "infer_arg", "infer_scan", "infer_sort", "SCAN_KINDS",
           "ARG_KINDS", "SORT_MAX_AXIS"]

ARG_KINDS = ("argmax", "argmin")
SCAN_KINDS = ("sum", "prod", "max", "min")
SORT_MAX_AXIS = (1 << 31) - 1


def parse_axis(axis: object, rank: int, op: str) -> int:
    """``axis`` as an int in ``range(rank)`` (negative counts from the end)."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (numbers.Integral,
                                                                   np.integer)):
        raise ValidationError(f"axis must be an int (got {axis!r})", op=op)
    a = int(axis)
    if not -rank <= a < rank:
        raise ValidationError(f"axis {a} is out of range for rank {rank}", op=op,
                              kind="axis_out_of_bounds")
    return a + rank if a < 0 else a


def _ordered(dtype: DType, op: str, what: str) -> None:
    require_dtype(dtype, op, dtype.is_bool or dtype.is_integer or dtype.is_float,
                  f"{what} takes bool, integer and real float dtypes")


def infer_arg(dtype: DType, shape: Sequence[int], axis: object,
              op: str) -> tuple[int, tuple[int, ...]]:
    """Validate argmax/argmin; return (axis, result shape)."""
    _ordered(dtype, op, "argmax/argmin")
    check_rank(shape, op)
    ax = parse_axis(axis, len(shape), op)
    if shape[ax] == 0:
        raise ValidationError(f"{op} over an empty axis (shape {tuple(shape)}, axis {ax}) "
                              "has no maximum or minimum", op=op)
    return ax, tuple(s for i, s in enumerate(shape) if i != ax)


def _flag(value: object, op: str, what: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValidationError(f"{what} must be a bool (got {value!r})", op=op)
    return bool(value)


def infer_scan(kind: str, dtype: DType, shape: Sequence[int], axis: object, reverse: object,
               op: str) -> tuple[int, bool]:
    """Validate a cumulative op; return (axis, reverse). The result has ``shape``."""
    check_reduce_dtype(kind, dtype, op)
    check_rank(shape, op)
    return parse_axis(axis, len(shape), op), _flag(reverse, op, "reverse")


def infer_sort(dtype: DType, shape: Sequence[int], axis: object, descending: object,
               op: str) -> tuple[int, bool]:
    """Validate sort; return (axis, descending). The result has ``shape``."""
    _ordered(dtype, op, "sort")
    check_rank(shape, op)
    ax = parse_axis(axis, len(shape), op)
    desc = _flag(descending, op, "descending")
    if shape[ax] > SORT_MAX_AXIS:
        raise ValidationError(f"{op}: the sorted axis has {shape[ax]} elements; at most "
                              f"{SORT_MAX_AXIS} are supported", op=op)
    return ax, desc
