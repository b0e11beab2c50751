"""Copies between device views: the permutation-copy engine every family uses.

- ``copy_into(ctx, src, dst, op)``: ``dst[...] = src[...]`` for two views of one shape
  and dtype (any strides, including negative and, for ``src``, zero); ``dst`` overlaps
  neither ``src`` nor itself (the caller checked). Both compact: one ``cuMemcpyAsync``.
  Otherwise one launch of ``ptx/permute.cu`` planned by ``plan.cached_plan`` (row copy
  with 16-byte vectors, or the tiled transpose); the generic element-wise
  ``strided_copy`` of ``ptx/copy.cu`` only when a tiled plan would need more than
  2^31 - 1 tiles.
- ``copy_layout``: ``copy_into`` on raw layouts (shape, strides, offsets over two bases).
- ``materialize(ctx, view, op) -> Tensor``: a fresh compact copy of any view.
- ``permute_into(ctx, src, perm, op) -> Tensor``: a fresh compact tensor holding ``src``
  with its axes permuted (output axis i = input axis ``perm[i]``); ``perm`` is validated
  (``ValidationError`` naming ``op``) before anything is allocated.

Everything only enqueues; the caller entered the op and checked residency.
"""

from __future__ import annotations

from ...errors import RuntimeStateError
from ...exec.context import ExecContext
from ...shapes import check_permutation
from ...shapes.structural import int_tuple
from ...tensor import Tensor, _Strided, is_row_major
from .._layout import index_type, layouts_for
from .plan import alignment, cached_plan

__all__ = ["copy_into", "copy_layout", "materialize", "permute_into", "STORAGE"]

THREADS = (256, 1, 1)
# C++ storage type of an element of each size (bit moves only).
STORAGE = {1: "tf::u8", 2: "unsigned short", 4: "tf::u32", 8: "tf::u64", 16: "tf::b128"}


def device_ptr(base: Tensor, op: str) -> int:
    """The device address of a (residency-checked) tensor's buffer."""
    buf = base.buffer
    if buf is None:
        raise RuntimeStateError("expected a device tensor; found a host tensor", op=op)
    return buf.ptr


def copy_into(ctx: ExecContext, src: _Strided, dst: _Strided, op: str) -> None:
    """Enqueue ``dst[...] = src[...]`` (validated by the caller; see the module docs)."""
    copy_layout(ctx, src.shape, src.base, src.strides, src.offset, dst.base, dst.strides,
                dst.offset, op)


def copy_layout(ctx: ExecContext, shape, sbase: Tensor, ss, so: int, dbase: Tensor, ds,
                do: int, op: str) -> None:
    """``copy_into`` on raw layouts (shape, strides and offsets over two bases)."""
    n = 1
    for e in shape:
        n *= e
    if n == 0:
        return
    item = sbase.dtype.itemsize
    sptr, dptr = device_ptr(sbase, op), device_ptr(dbase, op)
    if is_row_major(shape, ss) and is_row_major(shape, ds):
        ctx.copy(dptr + do * item, sptr + so * item, n * item, op)
        return
    plan = cached_plan((tuple(shape), tuple(ss), so, sbase.size, alignment(sptr),
                        tuple(ds), do, dbase.size, alignment(dptr), item))
    if plan is None:  # more tiles than a grid holds: the generic element-wise copy
        _strided_copy(ctx, sbase.view(shape, ss, so), dbase.view(shape, ds, do), op)
        return
    fn = ctx.function("permute", plan.expression)
    ctx.launch(fn, plan.codes, plan.grid, (dptr, sptr, plan.params), op, block=THREADS)


def _strided_copy(ctx: ExecContext, src: _Strided, dst: _Strided, op: str) -> None:
    """The element-wise strided copy (any layouts, one element per thread step)."""
    n = src.size
    _, (dl, sl) = layouts_for(src.shape, dst, src)
    itype = index_type(n)
    fn = ctx.function("copy", f"tf::strided_copy<{STORAGE[src.dtype.itemsize]}, {itype}>")
    codes = "PLPL" + ("I" if itype == "tf::u32" else "Q")
    ctx.launch(fn, codes, (ctx.grid(n), 1, 1), (device_ptr(dst.base, op), dl,
                                                  device_ptr(src.base, op), sl, n), op)


def materialize(ctx: ExecContext, view: _Strided, op: str) -> Tensor:
    """A fresh compact copy of ``view``."""
    out = ctx.alloc(view.dtype, view.shape, op)
    copy_into(ctx, view, out, op)
    return out


def permute_into(ctx: ExecContext, src: _Strided, perm, op: str) -> Tensor:
    """A compact tensor holding ``src`` permuted (output axis i = src axis perm[i])."""
    shape, strides = src.shape, src.strides
    try:
        p = tuple(perm)
        ok = sorted(p) == list(range(len(shape))) and all(type(a) is int for a in p)
    except TypeError:
        ok = False
    if not ok:  # the precise error
        p = check_permutation(int_tuple(perm, op, "perm"), len(shape), op)
    out_shape = tuple(shape[a] for a in p)
    out = ctx.alloc(src.dtype, out_shape, op)
    copy_layout(ctx, out_shape, src.base, tuple(strides[a] for a in p), src.offset, out,
                out.strides, 0, op)
    return out
