"""Validation of the creation ops ``iota``, ``full``, ``zeros``, ``ones`` and ``empty``
(pure Python). Everything raises before anything is allocated:

- a shape is an int or a sequence of ints >= 0 (a list, tuple or 1-d integer array; no
  bools, sets, dicts or iterators), of rank <= 8 (``ValidationError``); every extent and
  the byte size must be below 2**63 (``ValidationError``, kind ``overflow``);
- a dtype is a ``DType``, its name or a numpy dtype (``UnsupportedDTypeError``);
- ``iota`` takes the numeric dtypes (not bool, as StableHLO), a rank of at least 1 and a
  ``dimension`` in ``range(rank)`` (``ValidationError``, kind ``axis_out_of_bounds``);
  for an integer dtype every index along ``dimension`` must be a value of it
  (``ValidationError``, kind ``overflow``: an int8 iota holds at most 128 steps); float
  dtypes round large indices to nearest even (float16 is exact up to 2048);
- fill values are checked against the dtype by ``ops.storage.fill.value_bytes``.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..dtypes import ALL_DTYPES, DType, as_dtype
from ..errors import UnsupportedDTypeError, ValidationError
from .structural import out_shape

__all__ = ["IOTA_DTYPES", "shape_of", "dtype_of", "iota"]

IOTA_DTYPES = tuple(d for d in ALL_DTYPES if d.is_numeric)


def shape_of(shape: object, op: str, itemsize: int = 1) -> tuple[int, ...]:
    """A requested shape: an int (rank 1) or a sequence of ints >= 0 (a list, tuple or
    1-d integer array: not a set, dict or iterator; no bools), rank <= 8, every extent
    and the byte size of ``itemsize``-byte elements below 2**63 (kind ``overflow``)."""
    if isinstance(shape, (bool, np.bool_)):
        raise ValidationError(f"shape must be an int or a sequence of ints (got {shape!r})",
                              op=op)
    if isinstance(shape, np.ndarray) and shape.ndim == 0:
        raise ValidationError(f"shape must be an int or a sequence of ints (got the 0-d "
                              f"array {shape!r}: pass int(shape) for a rank-1 shape)", op=op)
    if isinstance(shape, numbers.Integral):
        return out_shape((int(shape),), op, itemsize)
    return out_shape(shape, op, itemsize)


def dtype_of(dtype: object, op: str) -> DType:
    """A requested dtype (DType, name or numpy dtype)."""
    try:
        return as_dtype(dtype)
    except UnsupportedDTypeError as exc:
        raise UnsupportedDTypeError(str(exc), op=op) from None


def iota(dtype: object, shape: object, dimension: object,
         op: str = "iota") -> tuple[DType, tuple[int, ...], int]:
    """(dtype, shape, dimension) of a valid ``iota`` request."""
    dt = dtype_of(dtype, op)
    if dt not in IOTA_DTYPES:
        raise UnsupportedDTypeError(f"iota is not defined for {dt.value} (numeric dtypes "
                                    "only: cast an integer iota to bool)", op=op)
    dims = shape_of(shape, op, dt.itemsize)
    if isinstance(dimension, bool) or not isinstance(dimension, numbers.Integral):
        raise ValidationError(f"dimension must be an int (got {dimension!r})", op=op)
    axis = int(dimension)
    if not 0 <= axis < len(dims):
        raise ValidationError(f"dimension {axis} is out of range for shape {dims} (rank "
                              f"{len(dims)}; iota needs rank >= 1)", op=op,
                              kind="axis_out_of_bounds")
    if dt.is_integer and dims[axis] - 1 > np.iinfo(dt.numpy).max:
        raise ValidationError(f"iota of {dims[axis]} steps does not fit {dt.value} (its "
                              f"largest value is {np.iinfo(dt.numpy).max})", op=op,
                              kind="overflow")
    return dt, dims, axis
