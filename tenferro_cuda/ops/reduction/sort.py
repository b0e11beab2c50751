"""``sort`` and ``sort_with_indices`` along one axis (and their ``_read`` forms).

Semantics (shapes/reduction_axis.py): a stable sort, ascending or descending, of bool,
integer and real float tensors; NaNs come last in both directions, in their input order;
-0.0 and +0.0 are equal (they keep their input order, each keeps its sign); the elements'
own bits are moved (a NaN keeps its payload). ``sort_with_indices`` also returns the int64
positions along the axis of the sorted elements in the input (``take_along_axis(x,
indices) == values``). How it runs (shapes/reduction_sort.py): one ``sort_small`` launch
for rows of up to 2048 elements, else an LSD radix sort (one pass per byte) whose scratch
comes from the pool and is freed (stream ordered) on return. Everything is enqueued on the
session stream; nothing reads device memory back.
"""

from __future__ import annotations

from collections.abc import Callable

from ...dtypes import DType
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...kernels.args import layout_bytes
from ...kernels.families import sort as fam
from ...memo import BoundedCache
from ...shapes import reduction_axis as shp
from ...shapes import reduction_sort as plan
from ...tensor import Tensor, TensorView, is_row_major
from .. import storage
from .plan import CACHE_MAX, resident_blocks
from .scan import enqueue_scan

__all__ = ["METHODS", "small_codes", "HIST_CODES", "SCATTER_CODES"]

HIST_CODES = "PIIIIiiP"
SCATTER_CODES = "PPPPPIIIIiiP"
_plans: BoundedCache = BoundedCache(CACHE_MAX)


def small_codes(index: str) -> str:
    """Argument codes of ``sort_small`` (see ptx/sort.cu for the parameter list)."""
    x = "I" if index == "tf::u32" else "Q"
    return f"PLqPPLq{x}{x}iii"


def sort(ctx: ExecContext, input: Tensor | TensorView, axis: int = -1,
         descending: bool = False) -> Tensor:
    """Stable sort along ``axis``.

    Parameters
    ----------
    input : Tensor or TensorView
        A device tensor of this session; bool, integer or real float dtype, rank 1..8;
        fewer than 2^31 elements along ``axis``.
    axis : int
        The axis, in ``[-ndim, ndim)`` (default: the last).
    descending : bool
        Largest first. Equal elements keep their input order in both directions.

    Returns
    -------
    Tensor
        The input's shape and dtype. NaNs come last in both directions (as numpy's and
        jax's ascending sort; their descending sorts put NaNs first); -0.0 and +0.0 are
        equal and keep their input order.

    Raises
    ------
    ValidationError
        ``axis`` not an int or out of range (rank 0 has no axis); ``descending`` not a
        bool; rank > 8; 2^31 or more elements along the axis.
    UnsupportedDTypeError
        complex input.
    RuntimeStateError
        ``input`` is not resident on this session's device; closed session.
    """
    return _sort(ctx, input, axis, descending, False, "sort")[0]


def sort_read(ctx: ExecContext, input: Tensor | TensorView, axis: int = -1,
              descending: bool = False) -> Tensor:
    """``sort`` of an owned tensor or a borrowed view."""
    return _sort(ctx, input, axis, descending, False, "sort_read")[0]


def sort_with_indices(ctx: ExecContext, input: Tensor | TensorView, axis: int = -1,
                      descending: bool = False) -> tuple[Tensor, Tensor]:
    """``sort``, and the int64 positions along ``axis`` of the sorted elements in the
    input: ``(values, indices)`` with ``values == take_along_axis(input, indices)``; the
    indices of equal elements ascend (a stable sort). See ``sort``."""
    values, indices = _sort(ctx, input, axis, descending, True, "sort_with_indices")
    assert indices is not None
    return values, indices


def sort_with_indices_read(ctx: ExecContext, input: Tensor | TensorView, axis: int = -1,
                           descending: bool = False) -> tuple[Tensor, Tensor]:
    """``sort_with_indices`` of an owned tensor or a borrowed view."""
    values, indices = _sort(ctx, input, axis, descending, True, "sort_with_indices_read")
    assert indices is not None
    return values, indices


def _sort(ctx: ExecContext, x, axis, descending, with_indices: bool,
          op: str) -> tuple[Tensor, Tensor | None]:
    buf = resident(ctx, x, op)
    ax, desc = shp.infer_sort(x.dtype, x.shape, axis, descending, op)
    out = ctx.alloc(x.dtype, x.shape, op)
    idx = ctx.alloc(DType.INT64, x.shape, op) if with_indices else None
    if out.size == 0:
        return out, idx
    if x.shape[ax] <= plan.SMALL:
        _small(ctx, x, buf.ptr, ax, desc, out, idx, op)
    else:
        _radix(ctx, x, ax, desc, out, idx, op)
    return out, idx


def _small(ctx: ExecContext, x, ptr: int, ax: int, desc: bool, out: Tensor,
           idx: Tensor | None, op: str) -> None:
    key = ("small", x.shape, x.strides, x.offset, ax)
    p = _plans.get(key)
    if p is None:
        p = _plans.put(key, plan.plan_small(x.shape, x.strides, x.offset, out.strides, ax))
    expr = fam.FAMILY.entry("sort_small").expression(fam.policy(x.dtype), p.index)
    fn = ctx.function("sort", expr)
    ctx.prepare(("sort", expr), fn, small_codes(p.index), op=op).run(
        p.grid, ptr, layout_bytes(p.rin.shape, p.rin.strides, p.rin.offset), p.st_in,
        out.data_ptr(), idx.data_ptr() if idx is not None else 0,
        layout_bytes(p.rout.shape, p.rout.strides, p.rout.offset), p.st_out, p.n, p.m,
        p.logp, p.logt, int(desc))


def _radix(ctx: ExecContext, x, ax: int, desc: bool, out: Tensor, idx: Tensor | None,
           op: str) -> None:
    last = x.ndim - 1
    perm = tuple(i for i in range(x.ndim) if i != ax) + (ax,)
    if ax == last and is_row_major(x.shape, x.strides):
        src = x.base.buffer.ptr + x.offset * x.dtype.itemsize
    else:  # compact keys with the axis last (freed on return, after the passes)
        moved = storage.permute_into(ctx, x, perm, op)
        src = moved.data_ptr()
    shape = tuple(x.shape[i] for i in perm)
    dst, dst_idx = out, idx
    if ax != last:  # results in that order too, moved back at the end
        dst = ctx.alloc(x.dtype, shape, op)
        dst_idx = ctx.alloc(DType.INT64, shape, op) if idx is not None else None
    n = x.shape[ax]
    p = _radix_plan(ctx, x.dtype, out.size // n, n)
    scratch = ctx.alloc(x.dtype, (out.size,), op)
    pos = ctx.alloc(DType.INT32, (out.size,), op) if idx is not None else None
    counts = ctx.alloc(DType.INT32, (p.m * 256 * p.bpr,), op)
    keys = {"out": dst.data_ptr(), "scratch": scratch.data_ptr()}
    positions = {"scratch": pos.data_ptr() if pos is not None else 0,
                 "low": dst_idx.data_ptr() if dst_idx is not None else 0}
    pol = fam.policy(x.dtype)
    hist = ctx.function("sort", fam.FAMILY.entry("radix_hist").expression(pol))
    scatter_expr = fam.FAMILY.entry("radix_scatter").expression(pol)
    scatter = ctx.function("sort", scatter_expr)
    k_in, i_in = src, 0
    for i, (kb, ib) in enumerate(zip(p.key_buffers(), p.index_buffers())):
        shift = 8 * i
        ctx.prepare(("sort", "hist", pol), hist, HIST_CODES, op=op).run(
            p.grid, k_in, n, p.bpr, p.span, p.nitems, shift, int(desc), counts.data_ptr())
        enqueue_scan(ctx, "sum", DType.INT32, p.counts_rows(), counts.data_ptr(),
                     counts.data_ptr(), op)
        k_out = keys[kb]
        i_out = i_out64 = 0
        if dst_idx is not None:
            if ib == "indices":
                i_out64 = dst_idx.data_ptr()
            else:
                i_out = positions[ib]
        ctx.prepare(("sort", scatter_expr), scatter, SCATTER_CODES, op=op).run(
            p.grid, k_in, i_in, k_out, i_out, i_out64, n, p.bpr, p.span, p.nitems, shift,
            int(desc), counts.data_ptr())
        k_in, i_in = k_out, i_out
    if ax != last:
        back = tuple(perm.index(i) for i in range(x.ndim))  # dst axis of each out axis
        storage.copy_into(ctx, dst.permute(back), out, op)
        if idx is not None and dst_idx is not None:
            storage.copy_into(ctx, dst_idx.permute(back), idx, op)


def _radix_plan(ctx: ExecContext, dtype: DType, m: int, n: int) -> plan.RadixPlan:
    key = ("radix", ctx.runtime.identity.serial, dtype.itemsize, m, n)
    p = _plans.get(key)
    if p is None:
        expr = fam.FAMILY.entry("radix_scatter").expression(fam.policy(dtype))
        p = _plans.put(key, plan.plan_radix(m, n, dtype.itemsize,
                                            resident_blocks(ctx, "sort", expr)))
    return p


METHODS: tuple[tuple[str, Callable], ...] = (
    ("sort", sort), ("sort_read", sort_read),
    ("sort_with_indices", sort_with_indices),
    ("sort_with_indices_read", sort_with_indices_read),
)
