"""Dtype conversion functions: ``cast`` (the projection between any two of the 15 dtypes)
and ``convert`` (only along the value-preserving promotion lattice of
``dtypes.lattice_allows``; anything else raises ``UnsupportedDTypeConversionError``).

Cast rules (``docs/dtypes.md``): float -> integer truncates toward zero and saturates,
NaN -> 0; integer -> integer wraps; every conversion to a float dtype rounds once to
nearest even; complex -> real drops the imaginary part; numeric -> bool is ``!= 0``;
bool -> numeric is 0/1. Both accept tensors and strided views and return a new compact
tensor; a same-dtype cast is a copy.
"""

from __future__ import annotations

from collections.abc import Callable

from ...dtypes import ALL_DTYPES, DType
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...shapes.elementwise import CAST_KINDS, cast_target, check_convert
from ...tensor import Tensor, TensorView
from .methods import impl_for

__all__ = ["METHODS", "cast", "convert"]

# Keyed by the dtype's name: a str hash is cached, an Enum's is a Python call.
_CAST = {to.value: impl_for(CAST_KINDS[to], "cast", False) for to in ALL_DTYPES}
_CONVERT = {to.value: impl_for(CAST_KINDS[to], "convert", False) for to in ALL_DTYPES}


def cast(ctx: ExecContext, x: Tensor | TensorView, to: DType | str) -> Tensor:
    """Project ``x`` onto the dtype ``to``.

    Parameters
    ----------
    x : Tensor or TensorView
        A device tensor or view of this session, any dtype.
    to : DType, dtype name or numpy dtype
        The target dtype.

    Returns
    -------
    Tensor
        A new compact tensor of dtype ``to`` (the work is enqueued).

    Raises
    ------
    UnsupportedDTypeError
        ``to`` is not one of the 15 dtypes.
    RuntimeStateError
        ``x`` is not resident on this session, or the session is closed.
    """
    if type(to) is not DType:
        to = cast_target(to, "cast")
    return _CAST[to._value_](ctx, x)


def convert(ctx: ExecContext, x: Tensor | TensorView, to: DType | str) -> Tensor:
    """Convert ``x`` to ``to`` where every value is preserved (the promotion lattice).

    Parameters
    ----------
    x : Tensor or TensorView
        A device tensor or view of this session.
    to : DType, dtype name or numpy dtype
        The target dtype; ``dtypes.lattice_allows(x.dtype, to)`` must hold.

    Returns
    -------
    Tensor
        A new compact tensor of dtype ``to`` (the work is enqueued).

    Raises
    ------
    UnsupportedDTypeConversionError
        The lattice does not allow ``x.dtype -> to`` (use ``cast``).
    UnsupportedDTypeError
        ``to`` is not one of the 15 dtypes.
    RuntimeStateError
        ``x`` is not resident on this session, or the session is closed.
    """
    op = "convert"
    target = to if isinstance(to, DType) else cast_target(to, op)
    resident(ctx, x, op, "x")
    check_convert(x.dtype, target, op)
    return _CONVERT[target.value](ctx, x)


METHODS: tuple[tuple[str, Callable], ...] = (("cast", cast), ("convert", convert))
