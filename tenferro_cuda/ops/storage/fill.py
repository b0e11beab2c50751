"""Fills and in-place scaling of device views (used by every family and the kernel
session): ``fill(ctx, out, value, op)`` and ``scale(ctx, out, factor, op)``.

Both validate the scalar against ``out``'s dtype before anything is enqueued
(``shapes.reduction.scalar_bytes``: ints in range, finite-or-representable floats,
complex only for complex dtypes), and only enqueue.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ...errors import ValidationError
from ...exec.context import ExecContext
from ...shapes.reduction import scalar_bytes
from ...tensor import _Strided
from .._layout import index_type, layouts_for
from .copy import STORAGE, copy_into, device_ptr

__all__ = ["fill", "scale", "value_bytes"]


def _code(item: int) -> str:
    return "X16" if item == 16 else f"S{item}"


def value_bytes(value: object, dtype: DType, op: str, what: str = "value") -> bytes:
    """``value`` as one element of ``dtype`` (bool: True/False or 0/1), else
    ValidationError."""
    if dtype is DType.BOOL:
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, int) and value in (0, 1)):
            return bytes([int(value)])
        raise ValidationError(f"{what} must be True/False (or 0/1) for bool (got {value!r})",
                              op=op)
    return scalar_bytes(value, dtype, op, what)


def fill(ctx: ExecContext, out: _Strided, value: object, op: str) -> None:
    """Enqueue ``out[...] = value`` (a Python scalar representable in out's dtype)."""
    raw = value_bytes(value, out.dtype, op)
    n = out.size
    if n == 0:
        return
    if not out.is_contiguous:
        tmp = ctx.alloc(out.dtype, out.shape, op)
        fill(ctx, tmp, value, op)
        copy_into(ctx, tmp, out, op)
        return
    item = out.dtype.itemsize
    if raw == bytes(item):
        ctx.memset(out.data_ptr(), 0, n * item, op)
        return
    fn = ctx.function("copy", f"tf::fill<{STORAGE[item]}>")
    ctx.launch(fn, f"P{_code(item)}q", (ctx.grid(n), 1, 1), (out.data_ptr(), raw, n), op)


def scale(ctx: ExecContext, out: _Strided, factor: object, op: str) -> None:
    """Enqueue ``out[...] *= factor`` (numeric dtypes)."""
    raw = scalar_bytes(factor, out.dtype, op, "factor")
    n = out.size
    if n == 0:
        return
    item = out.dtype.itemsize
    _, (lay,) = layouts_for(out.shape, out)
    itype = index_type(n)
    fn = ctx.function("copy", f"tf::scale_inplace<{out.dtype.ctype}, {itype}>")
    codes = f"PL{_code(item)}" + ("I" if itype == "tf::u32" else "Q")
    ctx.launch(fn, codes, (ctx.grid(n), 1, 1), (device_ptr(out.base, op), lay, raw, n), op)
