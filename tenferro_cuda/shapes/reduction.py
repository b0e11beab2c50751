"""Validation and shape inference of the reductions and BLAS-1 ops (pure Python).

Reductions (``reduce_sum/prod/max/min/and/or``): ``axes`` is a sequence of distinct ints
in ``range(rank)`` (the spec's ``&[usize]``: negative axes are out of range); the reduced
axes are removed from the shape (all axes -> rank 0; no axes -> a copy). sum/prod/max/min
accept every numeric dtype (bool is not); max/min are not defined for complex; and/or take
bool (logical) and the integer dtypes (bitwise) only. The result dtype is the input
dtype: integer sums and products wrap in it (``np.sum(x, dtype=x.dtype)``), float16 and
bfloat16 are accumulated in float32 and rounded once. Reducing over zero elements gives 0
(sum, or), 1 (prod) or all bits set (and: True, -1, 255); max/min of zero elements raise
``ValidationError``.

BLAS-1: ``vdot`` (same shape and dtype), ``norm_squared`` (result dtype: the real dtype),
``axpby`` scalars (``scalar_bytes``: the value converted to the tensor dtype).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from ..dtypes import DType
from ..errors import UnsupportedDTypeError, ValidationError
from . import check_rank, normalize_axes, require_dtype, same_dtype, same_shape
from .scalars import Misfit, as_builtin, int_as_float, overflow_text, shown

REDUCE_KINDS = ("sum", "prod", "max", "min", "and", "or")


def check_reduce_dtype(kind: str, dtype: DType, op: str) -> None:
    if kind in ("and", "or"):
        require_dtype(dtype, op, dtype.is_bool or dtype.is_integer,
                      f"reduce_{kind} takes bool and integer dtypes")
        return
    require_dtype(dtype, op, dtype.is_numeric, "reductions take numeric dtypes")
    if kind in ("max", "min") and dtype.is_complex:
        raise UnsupportedDTypeError(f"{op} is not defined for {dtype.value} (complex numbers "
                                    "are not ordered)", op=op)


def parse_axes(axes: object, rank: int, op: str) -> tuple[int, ...]:
    """``axes`` (any iterable of ints) as a tuple of distinct ints in ``range(rank)``."""
    if isinstance(axes, (str, bytes, dict)):
        raise ValidationError(f"axes must be a sequence of ints (got {axes!r})", op=op)
    try:
        items = list(axes)  # type: ignore[call-overload]
    except TypeError:
        raise ValidationError(f"axes must be a sequence of ints (got {axes!r})",
                              op=op) from None
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (numbers.Integral, np.integer)):
            raise ValidationError(f"axes must be ints (got {a!r} in {axes!r})", op=op)
    return normalize_axes(items, rank, op)


def infer_reduce(kind: str, dtype: DType, shape: Sequence[int], axes: object,
                 op: str) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Validate one reduction; return (axes, result shape, elements reduced per output)."""
    check_reduce_dtype(kind, dtype, op)
    check_rank(shape, op)
    ax = parse_axes(axes, len(shape), op)
    out_shape = tuple(s for i, s in enumerate(shape) if i not in ax)
    count = math.prod(shape[i] for i in ax)
    if count == 0 and kind in ("max", "min"):
        raise ValidationError(
            f"{op} over an empty axis (shape {tuple(shape)}, axes {ax}) has no identity",
            op=op)
    return ax, out_shape, count


def identity(kind: str, dtype: DType) -> int | bool:
    """The result of reducing zero elements (the operator's identity) as a Python value
    of ``dtype``: 0 for sum/or, 1 for prod, all bits set for and."""
    if kind == "and":
        if dtype.is_bool:
            return True
        return -1 if dtype.is_signed_integer else int(np.iinfo(dtype.numpy).max)
    if kind == "or":
        return False if dtype.is_bool else 0
    return 0 if kind == "sum" else 1


def infer_vdot(a_dtype: DType, a_shape: Sequence[int], b_dtype: DType,
               b_shape: Sequence[int], op: str) -> DType:
    dtype = same_dtype(op, a_dtype, b_dtype)
    require_dtype(dtype, op, dtype.is_numeric, "vdot takes numeric dtypes")
    same_shape(op, a_shape, b_shape)
    check_rank(a_shape, op)
    return dtype


def infer_norm_squared(dtype: DType, shape: Sequence[int], op: str) -> DType:
    require_dtype(dtype, op, dtype.is_numeric, "norm_squared takes numeric dtypes")
    check_rank(shape, op)
    return dtype.real


def infer_axpby(x_dtype: DType, x_shape: Sequence[int], y_dtype: DType,
                y_shape: Sequence[int], op: str) -> DType:
    dtype = same_dtype(op, x_dtype, y_dtype)
    require_dtype(dtype, op, dtype.is_numeric, "axpby takes numeric dtypes")
    same_shape(op, x_shape, y_shape)
    check_rank(x_shape, op)
    return dtype


def scalar_bytes(value: object, dtype: DType, op: str, what: str) -> bytes:
    """``value`` converted to ``dtype`` as raw bytes, if it is representable there.

    Accepted: Python/numpy ints (and integral Fractions, taken exactly) for every numeric
    dtype (in range for integer dtypes; rounded once for float dtypes); other real numbers
    for float and complex dtypes (finite values must not overflow the dtype, float64's
    range included; inf and NaN are kept), and for integer dtypes when integral; complex
    numbers (and other non-real Numbers, as a Decimal) for complex dtypes only. Bools and
    anything else are rejected with ``ValidationError``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Number):
        raise ValidationError(f"{what} must be a number (got {value!r})", op=op)
    if isinstance(value, numbers.Integral):
        return _int_bytes(int(value), dtype, op, what)
    if isinstance(value, numbers.Rational) and value.denominator == 1:
        return _int_bytes(int(value.numerator), dtype, op, what)  # exact, not via float
    if isinstance(value, numbers.Real):
        if dtype.is_integer:
            return _int_bytes(_integral(value, dtype, op, what), dtype, op, what)
        return _float_bytes(_builtin(value, complex if dtype.is_complex else float, dtype,
                                     op, what), dtype, op, what)
    if not dtype.is_complex:
        raise ValidationError(f"{what}={shown(value)} is not a real number (a "
                              f"{type(value).__name__}); {dtype.value} is real", op=op)
    return _float_bytes(_builtin(value, complex, dtype, op, what), dtype, op, what)


def _integral(value: numbers.Real, dtype: DType, op: str, what: str) -> int:
    """The int equal to the real ``value`` (not an integral Fraction), else the error."""
    i = None
    if not isinstance(value, numbers.Rational):  # a Rational here has a denominator != 1
        try:
            i = int(value)  # type: ignore[call-overload]
            if i != value:
                i = None
        except (OverflowError, ValueError, ArithmeticError):  # inf, NaN
            i = None
    if i is None:
        raise ValidationError(f"{what}={shown(value)} is not representable in "
                              f"{dtype.value} (not an integer)", op=op)
    return i


def _builtin(value: object, make: type[float] | type[complex], dtype: DType, op: str,
             what: str) -> float | complex:
    """``make(value)``, or the error: kind overflow for a finite value beyond float64."""
    v = as_builtin(value, make)
    if isinstance(v, Misfit):
        if v.kind == "overflow":
            raise _overflows(value, dtype, op, what)
        raise ValidationError(f"{what}={shown(value)} {v.text}", op=op, kind=v.kind)
    return v


def _int_bytes(v: int, dtype: DType, op: str, what: str) -> bytes:
    if dtype.is_integer:
        info = np.iinfo(dtype.numpy)
        if not info.min <= v <= info.max:
            raise ValidationError(f"{what}={shown(v)} is out of range for {dtype.value} "
                                  f"[{info.min}, {info.max}]", op=op, kind="overflow")
        return np.asarray(v, dtype.numpy).tobytes()
    f = int_as_float(v, dtype.real)  # rounded once from the exact int (not via float64)
    if isinstance(f, Misfit):  # beyond float64, so beyond every float dtype
        raise _overflows(v, dtype, op, what)
    return _float_bytes(complex(f) if dtype.is_complex else f, dtype, op, what)


def _overflows(value: object, dtype: DType, op: str, what: str) -> ValidationError:
    """The error for a finite ``value`` too large for ``dtype`` (its range, for an integer
    dtype)."""
    return ValidationError(f"{what}={shown(value)} {overflow_text(dtype)}", op=op,
                           kind="overflow")


def _float_bytes(v: float | complex, dtype: DType, op: str, what: str) -> bytes:
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.asarray(v, dtype.numpy)
    parts = (v.real, v.imag) if isinstance(v, complex) else (v,)
    got = (arr.real, arr.imag) if dtype.is_complex else (arr,)
    for want, have in zip(parts, got):
        if math.isfinite(want) and not np.isfinite(np.float64(have)):
            raise _overflows(v, dtype, op, what)
    return arr.tobytes()
