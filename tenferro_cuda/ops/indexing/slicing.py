"""``slice``, ``dynamic_slice``, ``dynamic_update_slice``, ``pad``, ``concatenate`` and
``reverse`` (StableHLO semantics; docs/indexing.md).

Static slices, reversals and concatenation are copies between strided views. The dynamic
slices read their start indices on the device and clamp them there (the op stays
enqueue-only). ``pad`` is output-driven: every output element is read from the input or
is the padding value.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...configs.indexing import PadConfig, SliceConfig
from ...dtypes import DType
from ...errors import ValidationError
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...shapes.indexing import (
    concatenate_shape,
    dynamic_slice_shape,
    dynamic_update_slice_check,
    pad_shape,
    pad_value_bytes,
    reverse_axes,
    slice_shape,
)
from ...tensor import Tensor, TensorView
from .base import copy_view, run
from .plan_copy import Dynamic, pad_launch

__all__ = ["slice_", "reverse", "concatenate", "dynamic_slice", "dynamic_update_slice", "pad"]


def _view(t: Tensor | TensorView) -> tuple[int, tuple[int, ...]]:
    return t.data_ptr(), t.strides


def _dynamic(starts: Tensor | TensorView, shape: Sequence[int], strides: Sequence[int],
             sizes: Sequence[int], on_dst: bool) -> Dynamic | None:
    """The device-side shift, or None when every start clamps to 0 (full extents)."""
    his = tuple(n - k for n, k in zip(shape, sizes))
    if not any(his):
        return None
    return Dynamic(starts.data_ptr(), starts.strides[0], starts.dtype is DType.INT64,
                   tuple(strides), his, on_dst)


def slice_(ctx: ExecContext, x: Tensor | TensorView, config: SliceConfig) -> Tensor:
    """``x[starts:limits:strides]`` per axis (StableHLO ``slice``).

    Parameters
    ----------
    x : Tensor or TensorView
        Any dtype, on this session's device.
    config : SliceConfig
        One start, limit and stride per axis (``0 <= start <= limit <= dim``).

    Returns
    -------
    Tensor
        Compact, extent ``ceil((limit - start) / stride)`` per axis.

    Raises
    ------
    ValidationError
        Config rank differs from ``x``'s, or a limit exceeds its extent.
    """
    op = "slice"
    resident(ctx, x, op, "input")
    shape = slice_shape(x.shape, config, op)
    out = ctx.alloc(x.dtype, shape, op)
    if out.size == 0:
        return out
    first = sum(s * st for s, st in zip(config.starts, x.strides))
    assert config.strides is not None  # SliceConfig filled in the default
    strides = [st * k for st, k in zip(x.strides, config.strides)]
    copy_view(ctx, shape, x.itemsize, _view(out),
              (x.data_ptr() + first * x.itemsize, strides), op)
    return out


def reverse(ctx: ExecContext, x: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
    """``x`` with the order of elements reversed along ``axes`` (StableHLO ``reverse``).

    Parameters
    ----------
    x : Tensor or TensorView
        Any dtype.
    axes : sequence of int
        Unique axes in ``range(rank)``; empty gives a copy.

    Returns
    -------
    Tensor
        Compact, the shape and dtype of ``x``.

    Raises
    ------
    ValidationError
        An axis out of range, repeated, or not an int.
    """
    op = "reverse"
    resident(ctx, x, op, "input")
    axes = reverse_axes(x.shape, axes, op)
    out = ctx.alloc(x.dtype, x.shape, op)
    if out.size == 0:
        return out
    strides = list(x.strides)
    last = 0
    for a in axes:
        last += (x.shape[a] - 1) * strides[a]
        strides[a] = -strides[a]
    copy_view(ctx, x.shape, x.itemsize, _view(out),
              (x.data_ptr() + last * x.itemsize, strides), op)
    return out


def concatenate(ctx: ExecContext, inputs: Sequence[Tensor | TensorView], axis: int
                ) -> Tensor:
    """The ``inputs`` joined along ``axis`` (StableHLO ``concatenate``).

    Parameters
    ----------
    inputs : sequence of Tensor or TensorView
        At least one; equal dtypes and ranks, equal extents off ``axis``.
    axis : int
        In ``range(rank)``.

    Returns
    -------
    Tensor
        Compact; extent along ``axis`` is the sum of the inputs'.

    Raises
    ------
    ValidationError
        No inputs, mismatched dtypes, ranks or extents, or a bad axis.
    """
    op = "concatenate"
    if isinstance(inputs, (Tensor, str, bytes)) or not isinstance(inputs, Sequence):
        raise ValidationError(f"inputs must be a sequence of tensors (got "
                              f"{type(inputs).__name__})", op=op)
    for i, t in enumerate(inputs):
        resident(ctx, t, op, f"inputs[{i}]")
    shape = concatenate_shape([t.shape for t in inputs], [t.dtype for t in inputs],
                              axis, op)
    ax = int(axis)
    out = ctx.alloc(inputs[0].dtype, shape, op)
    if out.size == 0:
        return out
    at = 0
    for t in inputs:
        dst = out.data_ptr() + at * out.strides[ax] * out.itemsize
        copy_view(ctx, t.shape, t.itemsize, (dst, out.strides), _view(t), op)
        at += t.shape[ax]
    return out


def dynamic_slice(ctx: ExecContext, x: Tensor | TensorView, starts: Tensor | TensorView,
                  slice_sizes: Sequence[int]) -> Tensor:
    """The ``slice_sizes`` window of ``x`` at ``starts`` (StableHLO ``dynamic_slice``).

    Parameters
    ----------
    x : Tensor or TensorView
        Any dtype.
    starts : Tensor or TensorView
        Rank-1 int32/int64 device tensor of ``rank(x)`` entries, read and clamped to
        ``[0, dim - size]`` by the kernel (no host read-back).
    slice_sizes : sequence of int
        One size per axis, ``0 <= size <= dim``.

    Returns
    -------
    Tensor
        Compact, of shape ``slice_sizes``.

    Raises
    ------
    ValidationError
        Sizes or starts of the wrong length, a size beyond its extent.
    UnsupportedDTypeError
        Starts that are not int32/int64.
    """
    op = "dynamic_slice"
    resident(ctx, x, op, "input")
    resident(ctx, starts, op, "starts")
    sizes = dynamic_slice_shape(x.shape, starts.shape, starts.dtype, slice_sizes, op)
    out = ctx.alloc(x.dtype, sizes, op)
    if out.size == 0:
        return out
    dyn = _dynamic(starts, x.shape, x.strides, sizes, on_dst=False)
    copy_view(ctx, sizes, x.itemsize, _view(out), _view(x), op, dyn)
    return out


def dynamic_update_slice(ctx: ExecContext, operand: Tensor | TensorView,
                         update: Tensor | TensorView,
                         starts: Tensor | TensorView) -> Tensor:
    """A copy of ``operand`` with ``update`` written at ``starts`` (StableHLO
    ``dynamic_update_slice``).

    Parameters
    ----------
    operand : Tensor or TensorView
        Any dtype; not modified.
    update : Tensor or TensorView
        Same dtype and rank, extents ``<=`` the operand's.
    starts : Tensor or TensorView
        Rank-1 int32/int64 device tensor, clamped on the device to
        ``[0, dim - update extent]``.

    Returns
    -------
    Tensor
        Compact, the operand's shape and dtype.

    Raises
    ------
    ValidationError
        Mismatched dtype or rank, an update larger than the operand, bad starts shape.
    UnsupportedDTypeError
        Starts that are not int32/int64.
    """
    op = "dynamic_update_slice"
    resident(ctx, operand, op, "operand")
    resident(ctx, update, op, "update")
    resident(ctx, starts, op, "starts")
    dynamic_update_slice_check(operand.shape, operand.dtype, update.shape, update.dtype,
                               starts.shape, starts.dtype, op)
    out = ctx.alloc(operand.dtype, operand.shape, op)
    if out.size == 0:
        return out
    copy_view(ctx, out.shape, out.itemsize, _view(out), _view(operand), op)
    if update.size:
        dyn = _dynamic(starts, out.shape, out.strides, update.shape, on_dst=True)
        copy_view(ctx, update.shape, out.itemsize, _view(out), _view(update), op, dyn)
    return out


def pad(ctx: ExecContext, x: Tensor | TensorView, config: PadConfig, value: object = 0
        ) -> Tensor:
    """``x`` padded by ``config`` with ``value`` (StableHLO ``pad``).

    Parameters
    ----------
    x : Tensor or TensorView
        Any dtype.
    config : PadConfig
        Edge padding ``low``/``high`` per axis (negative crops) and ``interior``
        padding (``>= 0``) between neighbours.
    value : scalar
        Representable in ``x``'s dtype (True/False for bool).

    Returns
    -------
    Tensor
        Compact, extent ``low + high + n + max(n - 1, 0) * interior`` per axis.

    Raises
    ------
    ValidationError
        Config rank differs from ``x``'s, a negative result extent, or a value that
        does not fit the dtype.
    """
    op = "pad"
    resident(ctx, x, op, "input")
    shape = pad_shape(x.shape, config, op, x.itemsize)
    raw = pad_value_bytes(value, x.dtype, op)
    out = ctx.alloc(x.dtype, shape, op)
    if out.size == 0:
        return out
    assert config.interior is not None  # PadConfig filled in the default
    run(ctx, pad_launch(x.itemsize, shape, out.data_ptr(), config.low, config.interior,
                        (x.data_ptr() if x.size else 0, x.shape, x.strides), raw,
                        ctx.sm_count), op)
    return out
