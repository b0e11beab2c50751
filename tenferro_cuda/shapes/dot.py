"""Validation and shape inference of ``dot_general`` (pure Python, no device).

``infer`` checks the operands against a ``DotGeneralConfig`` and returns the result
shape ``[batch..., lhs free..., rhs free...]``. ``scalars`` checks alpha/beta against the
operands' dtype. ``check_out`` checks a caller-owned output: exact shape and dtype,
writable (``shapes/aliasing.check_writable``), and no element addressed twice. All raise
before anything is allocated or launched. Overlap of an output with an input is judged by
device memory (``shapes/aliasing.check_output``), in the ops.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, cast

from ..configs.dot import DotGeneralAccumulation, DotGeneralConfig
from ..dtypes import DType
from ..errors import UnsupportedDTypeError, ValidationError
from . import MAX_RANK
from . import check_out as _check_out_base
from .aliasing import Strided, check_writable
from .scalars import Misfit, as_builtin, overflow_text, shown

__all__ = ["infer", "scalars", "check_out", "self_overlapping", "INT_RANGE", "SINGLE_SCALED",
           "fits_single"]

INT_RANGE = {d: ((-(1 << (8 * d.itemsize - 1)), (1 << (8 * d.itemsize - 1)) - 1)
                 if d.is_signed_integer else (0, (1 << (8 * d.itemsize)) - 1))
             for d in DType if d.is_integer}
_TF32_DTYPES = (DType.FLOAT32, DType.COMPLEX64)


def _check_axes(axes: tuple[int, ...], rank: int, what: str, op: str) -> None:
    for a in axes:
        if a >= rank:
            raise ValidationError(f"{what}: axis {a} is out of range for rank {rank}",
                                  op=op, kind="axis_out_of_bounds")


def infer(lhs_shape: Sequence[int], rhs_shape: Sequence[int], lhs_dtype: DType,
          rhs_dtype: DType, config: DotGeneralConfig, op: str,
          precision: str | None = None) -> tuple[int, ...]:
    """The result shape of ``dot_general(lhs, rhs, config)``; raises on a bad request."""
    if type(config) is not DotGeneralConfig and not isinstance(config, DotGeneralConfig):
        raise ValidationError(f"config must be a DotGeneralConfig (got "
                              f"{type(config).__name__})", op=op)
    if lhs_dtype is not rhs_dtype:
        raise ValidationError(f"dtype mismatch: lhs {lhs_dtype.value}, rhs {rhs_dtype.value} "
                              "(no implicit promotion; use convert or cast)", op=op,
                              kind="dtype_mismatch")
    if lhs_dtype is DType.BOOL:
        raise UnsupportedDTypeError(f"{op} is not defined for bool (use an integer dtype)",
                                    op=op)
    if (config.precision if precision is None else precision) != "default" and \
            lhs_dtype not in _TF32_DTYPES:
        raise ValidationError(f"precision 'tf32' applies to float32 and complex64 operands, "
                              f"not {lhs_dtype.value}", op=op)
    ranks = (len(lhs_shape), len(rhs_shape))
    free = config._free.get(ranks)
    if free is None:
        free = _check_ranks(config, ranks, op)
    lfree, rfree, pairs = free
    for a, b in pairs:
        if lhs_shape[a] != rhs_shape[b]:
            what = "batch" if a in config.lhs_batch_dims else "contracting"
            raise ValidationError(
                f"{what} axes pair lhs axis {a} (extent {lhs_shape[a]}) with rhs axis "
                f"{b} (extent {rhs_shape[b]}); paired extents must be equal "
                f"(lhs {tuple(lhs_shape)}, rhs {tuple(rhs_shape)})", op=op,
                kind="shape_mismatch")
    return (tuple([lhs_shape[a] for a in config.lhs_batch_dims])
            + tuple([lhs_shape[a] for a in lfree]) + tuple([rhs_shape[a] for a in rfree]))


def _check_ranks(config: DotGeneralConfig, ranks: tuple[int, int], op: str):
    """Validate ``config`` against operand ranks; cache (lhs free, rhs free, pairs)."""
    lr, rr = ranks
    for what, rank in (("lhs", lr), ("rhs", rr)):
        if rank > MAX_RANK:
            raise ValidationError(f"{what} rank {rank} exceeds the supported maximum of "
                                  f"{MAX_RANK}", op=op, kind="rank_mismatch")
    lb, rb = config.lhs_batch_dims, config.rhs_batch_dims
    lc, rc = config.lhs_contracting_dims, config.rhs_contracting_dims
    _check_axes(lb, lr, "lhs_batch_dims", op)
    _check_axes(lc, lr, "lhs_contracting_dims", op)
    _check_axes(rb, rr, "rhs_batch_dims", op)
    _check_axes(rc, rr, "rhs_contracting_dims", op)
    lfree = tuple(a for a in range(lr) if a not in lb and a not in lc)
    rfree = tuple(a for a in range(rr) if a not in rb and a not in rc)
    if len(lb) + len(lfree) + len(rfree) > MAX_RANK:
        raise ValidationError(f"the result rank {len(lb) + len(lfree) + len(rfree)} exceeds "
                              f"the supported maximum of {MAX_RANK}", op=op,
                              kind="rank_mismatch")
    free = (lfree, rfree, tuple(zip(lb + lc, rb + rc)))
    config._free[ranks] = free
    return free


def _fits(value, dtype: DType, what: str, op: str) -> int:
    lo, hi = INT_RANGE[dtype]
    if not lo <= value <= hi:
        raise ValidationError(f"{what} = {shown(value)} is not representable in {dtype.value} "
                              f"[{lo}, {hi}]", op=op, kind="overflow")
    return value


def scalars(acc: DotGeneralAccumulation, dtype: DType, op: str) -> tuple:
    """(alpha, beta) as values of ``dtype``'s class: int, float or complex.

    Integer dtypes take integral scalars in the dtype's range; float dtypes take real
    scalars (a complex number, even with a zero imaginary part, is rejected); complex
    dtypes take any number.
    """
    if not isinstance(acc, DotGeneralAccumulation):
        raise ValidationError(f"accumulation must be a DotGeneralAccumulation (got "
                              f"{type(acc).__name__})", op=op)
    kind = acc._kind
    if dtype.is_complex:
        calpha = _as(acc.alpha, complex, dtype, "alpha", op)
        cbeta = _as(acc.beta, complex, dtype, "beta", op)
        if dtype in SINGLE_SCALED and not fits_single(calpha, cbeta):
            raise _single_overflow(calpha, cbeta, dtype, op)
        return calpha, cbeta
    if dtype.is_integer:
        if kind:
            bad = acc.alpha if not isinstance(acc.alpha, int) else acc.beta
            raise ValidationError(f"alpha and beta must be integers for {dtype.value} "
                                  f"operands (got {shown(bad)})", op=op)
        return (_fits(int(cast(int, acc.alpha)), dtype, "alpha", op),
                _fits(int(cast(int, acc.beta)), dtype, "beta", op))
    if kind == 2:  # a complex number, or a Number that is not Real (a Decimal)
        bad = acc.alpha if not isinstance(acc.alpha, numbers.Real) else acc.beta
        raise ValidationError(f"alpha and beta must be real for {dtype.value} operands "
                              f"(got {shown(bad)})", op=op)
    alpha, beta = acc.alpha, acc.beta  # (a float is its own value)
    if type(alpha) is not float:
        alpha = _as(alpha, float, dtype, "alpha", op)
    if type(beta) is not float:
        beta = _as(beta, float, dtype, "beta", op)
    if dtype in SINGLE_SCALED and not fits_single(alpha, beta):
        raise _single_overflow(alpha, beta, dtype, op)
    return alpha, beta


def _as(value: object, make: type, dtype: DType, what: str, op: str) -> Any:
    """``make(value)`` (float or complex), or the ValidationError: kind overflow for a
    finite value beyond float64 (an int, a Fraction, a Decimal or an np.longdouble that
    ``make`` cannot convert or turns into inf), invalid_argument for one without such a
    value (a signaling NaN Decimal)."""
    v = as_builtin(value, make)
    if isinstance(v, Misfit):
        if v.kind == "overflow":
            raise ValidationError(f"{what}={shown(value)} {overflow_text(dtype)}", op=op,
                                  kind="overflow")
        raise ValidationError(f"{what}={shown(value)} {v.text}", op=op, kind=v.kind)
    return v


# dtypes whose cuBLAS call takes alpha and beta as float32 (parts of a complex64)
SINGLE_SCALED = frozenset({DType.FLOAT16, DType.BFLOAT16, DType.FLOAT32, DType.COMPLEX64})
_SINGLE_MAX = 3.4028234663852886e38


def fits_single(alpha: float | complex, beta: float | complex) -> bool:
    """Whether every finite part of ``alpha`` and ``beta`` fits a float32."""
    if type(alpha) is float and type(beta) is float and -_SINGLE_MAX <= alpha <= _SINGLE_MAX \
            and -_SINGLE_MAX <= beta <= _SINGLE_MAX:  # the usual case, without the loop
        return True
    for v in (alpha, beta):
        for part in (v.real, v.imag):
            if abs(part) > _SINGLE_MAX and math.isfinite(part):
                return False
    return True


def _single_overflow(alpha, beta, dtype: DType, op: str) -> ValidationError:
    what, value = ("beta", beta) if fits_single(alpha, 0.0) else ("alpha", alpha)
    return ValidationError(f"{what}={value!r} overflows the float32 scale of a "
                           f"{dtype.value} product (its largest finite value is "
                           f"{_SINGLE_MAX!r})", op=op, kind="overflow")


def self_overlapping(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True unless the layout provably addresses each element once.

    Sufficient test: with the axes sorted by |stride|, each stride exceeds the span of
    the axes inside it. Layouts that fail it (zero strides, interleaved overlap) are
    treated as overlapping.
    """
    span = 0  # fast accept: each axis, innermost first, steps over the axes inside it
    for s, st in zip(reversed(shape), reversed(strides)):
        if s > 1:
            st = abs(st)
            if st <= span:
                break
            span += st * (s - 1)
    else:
        return False
    dims = sorted((abs(st), s) for s, st in zip(shape, strides) if s > 1)
    span = 0
    for st, s in dims:
        if st <= span:
            return True
        span += st * (s - 1)
    return False


def check_out(out: Strided, shape: tuple[int, ...], dtype: DType, op: str) -> None:
    """A caller-owned output: exact shape and dtype, writable, no element addressed
    twice."""
    _check_out_base(out.shape, out.dtype, shape, dtype, op)
    check_writable(out, op)
    if out.size and self_overlapping(out.shape, out.strides):
        raise ValidationError(f"out (shape {out.shape}, strides {out.strides}) addresses some "
                              "element more than once; it cannot be written", op=op)
