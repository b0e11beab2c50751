"""argmax / argmin along one axis, int64 indices (and their ``_read`` forms).

Semantics (shapes/reduction_axis.py): the axis is removed; the result is the index of the
first maximum (minimum) along it; NaN beats every number, so a NaN anywhere gives the
index of the first NaN (as ``np.argmax``; ``jax.lax.argmax`` lets NaN win too); -0.0 and
+0.0 are equal. How it runs (shapes/reduction_arg.py): one or more passes of
``arg_reduce``, split winners in pool buffers freed (stream ordered) on return; the result
is the same every run, whatever the split. Everything is enqueued on the session stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ...dtypes import DType
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...kernels.args import layout_bytes
from ...kernels.families import argreduce as fam
from ...memo import BoundedCache
from ...shapes import reduction_arg as plan
from ...shapes import reduction_axis as shp
from ...tensor import Tensor, TensorView
from .. import storage
from .plan import CACHE_MAX, resident_blocks

__all__ = ["METHODS", "arg_codes"]

_plans: BoundedCache = BoundedCache(CACHE_MAX)  # (device, kind, layout, axis) -> steps


def arg_codes(index: str) -> str:
    """Argument codes of ``arg_reduce`` (see ptx/argreduce.cu for the parameter list)."""
    x = "I" if index == "tf::u32" else "Q"
    return f"PPL{x}q{x}{x}{x}iPP"


def argmax(ctx: ExecContext, input: Tensor | TensorView, axis: int) -> Tensor:
    """Index of the first maximum along ``axis`` (removed from the shape).

    Parameters
    ----------
    input : Tensor or TensorView
        A device tensor of this session; bool, integer or real float dtype, rank <= 8.
    axis : int
        The axis, in ``[-ndim, ndim)``; it must not have extent 0.

    Returns
    -------
    Tensor
        int64 indices. Ties go to the first index; NaN beats every number (the index of
        the first NaN); -0.0 equals +0.0; bool orders False < True.

    Raises
    ------
    ValidationError
        ``axis`` not an int or out of range; an axis of extent 0; rank > 8.
    UnsupportedDTypeError
        complex input.
    RuntimeStateError
        ``input`` is not resident on this session's device; closed session.
    """
    return _arg(ctx, "argmax", input, axis, "argmax")


def argmax_read(ctx: ExecContext, input: Tensor | TensorView, axis: int) -> Tensor:
    """``argmax`` of an owned tensor or a borrowed view."""
    return _arg(ctx, "argmax", input, axis, "argmax_read")


def argmin(ctx: ExecContext, input: Tensor | TensorView, axis: int) -> Tensor:
    """Index of the first minimum along ``axis``; NaN beats every number (see ``argmax``)."""
    return _arg(ctx, "argmin", input, axis, "argmin")


def argmin_read(ctx: ExecContext, input: Tensor | TensorView, axis: int) -> Tensor:
    """``argmin`` of an owned tensor or a borrowed view."""
    return _arg(ctx, "argmin", input, axis, "argmin_read")


class _Step(NamedTuple):
    expression: str
    codes: str
    args: tuple  # kept layout, n, st, chunk, nchunks, nout, group
    grid: int
    partial: int  # items of the winners it writes (0: the result)


def _value_dtype(dtype: DType) -> DType:
    if dtype in (DType.FLOAT16, DType.BFLOAT16):
        return DType.FLOAT32
    return DType.UINT8 if dtype is DType.BOOL else dtype


def _steps(ctx: ExecContext, kind: str, x, ax: int) -> tuple[_Step, ...]:
    key = (ctx.runtime.identity.serial, kind, x.dtype, x.shape, x.strides, x.offset, ax)
    steps = _plans.get(key)
    if steps is not None:
        return steps
    entry = fam.FAMILY.entry("arg_reduce")
    blocks = resident_blocks(ctx, "argreduce", entry.expression(
        *fam.targs(kind, x.dtype, False, "tf::u32")))
    kept, n, st = plan.split_axis(x.shape, x.strides, x.offset, ax)
    out = []
    for p in plan.plan_arg(kept, n, st, blocks):
        expr = entry.expression(*fam.targs(kind, x.dtype, p.src_partial, p.index))
        args = (layout_bytes(p.kept.shape, p.kept.strides, p.kept.offset), p.n, p.st,
                p.chunk, p.nchunks, p.nout, p.group)
        out.append(_Step(expr, arg_codes(p.index), args, p.blocks,
                         p.nitems if p.dst_partial else 0))
    return _plans.put(key, tuple(out))


def _arg(ctx: ExecContext, kind: str, x, axis, op: str) -> Tensor:
    buf = resident(ctx, x, op)
    ax, out_shape = shp.infer_arg(x.dtype, x.shape, axis, op)
    out = ctx.alloc(DType.INT64, out_shape, op)
    if out.size == 0:
        return out
    if x.shape[ax] == 1:
        storage.fill(ctx, out, 0, op)
        return out
    src, src_idx = buf.ptr, 0
    alive = []  # split winners: freed (stream-ordered, after their readers) on return
    for st in _steps(ctx, kind, x, ax):
        if st.partial:
            vals = ctx.alloc(_value_dtype(x.dtype), (st.partial,), op)
            idx = ctx.alloc(DType.INT64, (st.partial,), op)
            alive += [vals, idx]
            dst_val, dst_idx = vals.data_ptr(), idx.data_ptr()
        else:
            dst_val, dst_idx = 0, out.data_ptr()
        fn = ctx.function("argreduce", st.expression)
        ctx.prepare(("argreduce", st.expression), fn, st.codes, op=op).run(
            st.grid, src, src_idx, *st.args, dst_val, dst_idx)
        src, src_idx = dst_val, dst_idx
    return out


METHODS: tuple[tuple[str, Callable], ...] = (
    ("argmax", argmax), ("argmax_read", argmax_read),
    ("argmin", argmin), ("argmin_read", argmin_read),
)
