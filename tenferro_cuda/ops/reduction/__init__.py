"""Reductions: ``reduce_sum``, ``reduce_prod``, ``reduce_max``, ``reduce_min``,
``reduce_and``, ``reduce_or`` and their ``_read`` forms (the same operations; every form
accepts tensors and views).

Semantics (shapes/reduction.py): ``axes`` are distinct ints in ``range(rank)``, removed
from the result; the result dtype is the input dtype (integer sums and products wrap,
float16/bfloat16 accumulate in float32); zero reduced elements give the operator's
identity, and raise for max/min; NaN propagates through max/min; and/or are logical on
bool and bitwise on integers. How it runs (shapes/reduction_plan.py): one or
two kernel passes over memory, chunk partials in a pool buffer that is freed (stream
ordered) when the call returns, no atomics: the same input gives the same bits every run.
Everything is enqueued on the session stream; nothing waits for the device.

The launch steps of a layout are prepared once (``plan.py``); a repeated call with axes
given as a tuple of ints is served from a cache of validated calls (``_calls``).

The single-axis ops are modules of their own, their methods listed in ``METHODS`` too:
``argreduce`` (argmax/argmin), ``scan`` (cumsum/cumprod/cummax/cummin) and ``sort``
(sort/sort_with_indices). docs/reductions.md states the semantics of all of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...exec.context import ExecContext
from ...exec.residency import resident
from ...memo import BoundedCache
from ...shapes import reduction as shp
from ...tensor import Tensor, TensorView
from .. import storage
from . import argreduce, scan, sort
from .plan import CACHE_MAX, col_codes, resident_blocks, row_codes, steps_for

__all__ = ["METHODS", "resident_blocks", "row_codes", "col_codes"]

# (device, layout, axes exactly as passed: a tuple of ints, alignment) -> validated call
_calls: BoundedCache = BoundedCache(CACHE_MAX)


def reduce_sum(ctx: ExecContext, input: Tensor | TensorView,
               axes: Sequence[int]) -> Tensor:
    """Sum over ``axes`` (removed from the shape).

    Parameters
    ----------
    input : Tensor or TensorView
        A device tensor of this session, numeric dtype, rank <= 8.
    axes : sequence of int
        Distinct axes in ``range(input.ndim)``; ``()`` returns a copy.

    Returns
    -------
    Tensor
        Same dtype as ``input``: integers wrap, float16/bfloat16 are accumulated in
        float32; a sum over zero elements is 0.

    Raises
    ------
    ValidationError
        Bad, out-of-range or duplicate axes; rank > 8.
    UnsupportedDTypeError
        bool input.
    RuntimeStateError
        ``input`` is not resident on this session's device; closed session.
    """
    return _reduce(ctx, "sum", input, axes, "reduce_sum")


def reduce_sum_read(ctx: ExecContext, input: Tensor | TensorView,
                    axes: Sequence[int]) -> Tensor:
    """``reduce_sum`` of an owned tensor or a borrowed view (see ``reduce_sum``)."""
    return _reduce(ctx, "sum", input, axes, "reduce_sum_read")


def reduce_prod(ctx: ExecContext, input: Tensor | TensorView,
                axes: Sequence[int]) -> Tensor:
    """Product over ``axes``; like ``reduce_sum`` (the product of zero elements is 1)."""
    return _reduce(ctx, "prod", input, axes, "reduce_prod")


def reduce_prod_read(ctx: ExecContext, input: Tensor | TensorView,
                     axes: Sequence[int]) -> Tensor:
    """``reduce_prod`` of an owned tensor or a borrowed view."""
    return _reduce(ctx, "prod", input, axes, "reduce_prod_read")


def reduce_max(ctx: ExecContext, input: Tensor | TensorView,
               axes: Sequence[int]) -> Tensor:
    """Maximum over ``axes`` (removed from the shape); NaN propagates.

    Parameters
    ----------
    input : Tensor or TensorView
        A device tensor of this session; integer or real float dtype, rank <= 8.
    axes : sequence of int
        Distinct axes in ``range(input.ndim)``; ``()`` returns a copy.

    Returns
    -------
    Tensor
        Same dtype as ``input``.

    Raises
    ------
    ValidationError
        Bad, out-of-range or duplicate axes; rank > 8; zero elements to reduce (an
        axis of extent 0 among ``axes``).
    UnsupportedDTypeError
        bool or complex input.
    RuntimeStateError
        ``input`` is not resident on this session's device; closed session.
    """
    return _reduce(ctx, "max", input, axes, "reduce_max")


def reduce_max_read(ctx: ExecContext, input: Tensor | TensorView,
                    axes: Sequence[int]) -> Tensor:
    """``reduce_max`` of an owned tensor or a borrowed view."""
    return _reduce(ctx, "max", input, axes, "reduce_max_read")


def reduce_min(ctx: ExecContext, input: Tensor | TensorView,
               axes: Sequence[int]) -> Tensor:
    """Minimum over ``axes``; NaN propagates (see ``reduce_max``)."""
    return _reduce(ctx, "min", input, axes, "reduce_min")


def reduce_min_read(ctx: ExecContext, input: Tensor | TensorView,
                    axes: Sequence[int]) -> Tensor:
    """``reduce_min`` of an owned tensor or a borrowed view."""
    return _reduce(ctx, "min", input, axes, "reduce_min_read")


def reduce_and(ctx: ExecContext, input: Tensor | TensorView,
               axes: Sequence[int]) -> Tensor:
    """Logical (bool) or bitwise (integers) and over ``axes`` (removed from the shape).

    Parameters
    ----------
    input : Tensor or TensorView
        A device tensor of this session; bool or integer dtype, rank <= 8.
    axes : sequence of int
        Distinct axes in ``range(input.ndim)``; ``()`` returns a copy.

    Returns
    -------
    Tensor
        Same dtype as ``input``; the and of zero elements is all bits set (True, -1, 255).

    Raises
    ------
    ValidationError
        Bad, out-of-range or duplicate axes; rank > 8.
    UnsupportedDTypeError
        Float or complex input.
    RuntimeStateError
        ``input`` is not resident on this session's device; closed session.
    """
    return _reduce(ctx, "and", input, axes, "reduce_and")


def reduce_and_read(ctx: ExecContext, input: Tensor | TensorView,
                    axes: Sequence[int]) -> Tensor:
    """``reduce_and`` of an owned tensor or a borrowed view."""
    return _reduce(ctx, "and", input, axes, "reduce_and_read")


def reduce_or(ctx: ExecContext, input: Tensor | TensorView,
              axes: Sequence[int]) -> Tensor:
    """Logical (bool) or bitwise (integers) or over ``axes``; like ``reduce_and`` (the or of
    zero elements is 0 / False)."""
    return _reduce(ctx, "or", input, axes, "reduce_or")


def reduce_or_read(ctx: ExecContext, input: Tensor | TensorView,
                   axes: Sequence[int]) -> Tensor:
    """``reduce_or`` of an owned tensor or a borrowed view."""
    return _reduce(ctx, "or", input, axes, "reduce_or_read")


# --- implementation -------------------------------------------------------------------
def _reduce(ctx: ExecContext, kind: str, x, axes, op: str) -> Tensor:
    buf = resident(ctx, x, op)
    aligned = buf.ptr % 16 == 0  # pool buffers are; adopted ones may not be
    key = None
    call = None
    if type(axes) is tuple and all(type(a) is int for a in axes):
        key = (ctx.runtime.identity.serial, kind, x.dtype, x.shape, x.strides, x.offset,
               axes, aligned)
        call = _calls.get(key)
    if call is None:  # validate (raises before anything is allocated) and plan
        ax, out_shape, count = shp.infer_reduce(kind, x.dtype, x.shape, axes, op)
        work = count != 0 and 0 not in out_shape
        steps = steps_for(ctx, kind, x, ax, aligned) if work else None
        call = (ax, out_shape, count, steps)
        if key is not None:
            _calls.put(key, call)
    ax, out_shape, count, steps = call
    out = ctx.alloc(x.dtype, out_shape, op)
    if out.size == 0:
        return out
    if count == 0:
        storage.fill(ctx, out, shp.identity(kind, x.dtype), op)
        return out
    if steps is None:  # nothing reduced (extent-1 axes): a copy of the kept axes
        keep = [i for i in range(x.ndim) if i not in ax]
        src = TensorView(x.base, out_shape, [x.strides[i] for i in keep], x.offset)
        storage.copy_into(ctx, src, out, op)
        return out
    src_ptr = buf.ptr
    alive = []  # partial buffers: freed (stream-ordered, after their readers) on return
    for st in steps:
        if st.partial is None:
            dst_ptr = out.data_ptr()
        else:
            part = ctx.alloc(st.partial[0], (st.partial[1],), op)
            alive.append(part)
            dst_ptr = part.data_ptr()
        fn = ctx.function("reduce", st.expression)
        ctx.prepare((st.key, op), fn, st.codes, block=st.block, op=op).run3(
            st.grid, src_ptr, *st.args, dst_ptr)
        src_ptr = dst_ptr
    return out


METHODS: tuple[tuple[str, Callable], ...] = (
    ("reduce_sum", reduce_sum), ("reduce_sum_read", reduce_sum_read),
    ("reduce_prod", reduce_prod), ("reduce_prod_read", reduce_prod_read),
    ("reduce_max", reduce_max), ("reduce_max_read", reduce_max_read),
    ("reduce_min", reduce_min), ("reduce_min_read", reduce_min_read),
    ("reduce_and", reduce_and), ("reduce_and_read", reduce_and_read),
    ("reduce_or", reduce_or), ("reduce_or_read", reduce_or_read),
) + argreduce.METHODS + scan.METHODS + sort.METHODS
