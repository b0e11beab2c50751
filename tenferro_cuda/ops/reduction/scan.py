"""Cumulative ``cumsum``, ``cumprod``, ``cummax``, ``cummin`` along one axis (and their
``_read`` forms), with ``reverse``.

Semantics (shapes/reduction_axis.py): the result has the input's shape and dtype; element
j is the sum (product, maximum, minimum) of elements 0..j along the axis (j..n-1 when
``reverse``). Integers wrap; float16/bfloat16 run in float32 and each result is rounded
once; NaN propagates through cummax/cummin (every later element is NaN). How it runs
(shapes/reduction_scan.py): one pass, or reduce-scan-scan over pieces of the rows with
the totals in pool buffers freed (stream ordered) on return. The order of every
combination depends on the shape and strides only, so the bits are the same every run.

``enqueue_scan`` is the same engine on raw buffers (the sort's digit offsets use it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ...dtypes import DType
from ...exec.context import ExecContext
from ...exec.residency import resident
from ...kernels.args import layout_bytes
from ...kernels.families import scan as fam
from ...kernels.families.reduce import partial_dtype
from ...memo import BoundedCache
from ...shapes import reduction_axis as shp
from ...shapes import reduction_scan as plan
from ...tensor import Tensor, TensorView
from .plan import CACHE_MAX

__all__ = ["METHODS", "enqueue_scan", "row_codes", "col_codes"]

_plans: BoundedCache = BoundedCache(CACHE_MAX)  # (kind, dtype, rows) -> steps


def row_codes(index: str) -> str:
    """Argument codes of ``scan_rows`` (see ptx/scan.cu for the parameter list)."""
    x = "I" if index == "tf::u32" else "Q"
    return f"PLqPLq{x}{x}{x}iiPqqPqq"


def col_codes(index: str) -> str:
    """Argument codes of ``scan_cols``."""
    x = "I" if index == "tf::u32" else "Q"
    return f"PLqPLq{x}{x}{x}PqqPqq"


def cumsum(ctx: ExecContext, input: Tensor | TensorView, axis: int,
           reverse: bool = False) -> Tensor:
    """Cumulative sum along ``axis``.

    Parameters
    ----------
    input : Tensor or TensorView
        A device tensor of this session, numeric dtype, rank 1..8.
    axis : int
        The axis, in ``[-ndim, ndim)``.
    reverse : bool
        Accumulate from the last element of the axis to the first.

    Returns
    -------
    Tensor
        The input's shape and dtype: element j is the sum of elements 0..j (j..n-1 when
        ``reverse``). Integers wrap; float16/bfloat16 accumulate in float32 and each
        result is rounded once; the same input gives the same bits every run.

    Raises
    ------
    ValidationError
        ``axis`` not an int or out of range (rank 0 has no axis); ``reverse`` not a
        bool; rank > 8.
    UnsupportedDTypeError
        bool input.
    RuntimeStateError
        ``input`` is not resident on this session's device; closed session.
    """
    return _scan(ctx, "sum", input, axis, reverse, "cumsum")


def cumsum_read(ctx: ExecContext, input: Tensor | TensorView, axis: int,
                reverse: bool = False) -> Tensor:
    """``cumsum`` of an owned tensor or a borrowed view."""
    return _scan(ctx, "sum", input, axis, reverse, "cumsum_read")


def cumprod(ctx: ExecContext, input: Tensor | TensorView, axis: int,
            reverse: bool = False) -> Tensor:
    """Cumulative product along ``axis``; like ``cumsum`` (numeric dtypes, not bool)."""
    return _scan(ctx, "prod", input, axis, reverse, "cumprod")


def cumprod_read(ctx: ExecContext, input: Tensor | TensorView, axis: int,
                 reverse: bool = False) -> Tensor:
    """``cumprod`` of an owned tensor or a borrowed view."""
    return _scan(ctx, "prod", input, axis, reverse, "cumprod_read")


def cummax(ctx: ExecContext, input: Tensor | TensorView, axis: int,
           reverse: bool = False) -> Tensor:
    """Cumulative maximum along ``axis``; like ``cumsum`` for integer and real float
    dtypes (bool and complex raise ``UnsupportedDTypeError``). NaN propagates: every
    element from the first NaN on is NaN."""
    return _scan(ctx, "max", input, axis, reverse, "cummax")


def cummax_read(ctx: ExecContext, input: Tensor | TensorView, axis: int,
                reverse: bool = False) -> Tensor:
    """``cummax`` of an owned tensor or a borrowed view."""
    return _scan(ctx, "max", input, axis, reverse, "cummax_read")


def cummin(ctx: ExecContext, input: Tensor | TensorView, axis: int,
           reverse: bool = False) -> Tensor:
    """Cumulative minimum along ``axis``; NaN propagates (see ``cummax``)."""
    return _scan(ctx, "min", input, axis, reverse, "cummin")


def cummin_read(ctx: ExecContext, input: Tensor | TensorView, axis: int,
                reverse: bool = False) -> Tensor:
    """``cummin`` of an owned tensor or a borrowed view."""
    return _scan(ctx, "min", input, axis, reverse, "cummin_read")


class _Step(NamedTuple):
    expression: str
    codes: str
    src: object  # "in", "out" or a totals level
    dst: object
    args: tuple  # rin, st_in, rout, st_out and the counts, around the pointers
    carry: int | None
    totals: int | None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]


def _step(kind: str, dtype: DType, p: plan.ScanPass) -> _Step:
    # totals scan in their own dtype: float16/bfloat16 sums and products as float32
    d = dtype if p.src == "in" else partial_dtype(kind, dtype)
    r = p.rows
    entry = "scan_rows" if p.kernel == "rows" else "scan_cols"
    expr = fam.FAMILY.entry(entry).expression(*fam.targs(kind, d, p.index))
    if p.kernel == "rows":
        counts: tuple[int, ...] = (r.n, p.pieces, r.m if p.chain else r.m * p.pieces, p.seg,
                                   int(p.chain))
    else:
        counts = (r.n, p.chunk, r.m)
    codes = row_codes(p.index) if p.kernel == "rows" else col_codes(p.index)
    args = (layout_bytes(r.rin.shape, r.rin.strides, r.rin.offset), r.st_in,
            layout_bytes(r.rout.shape, r.rout.strides, r.rout.offset), r.st_out, counts)
    return _Step(expr, codes, p.src, p.dst, args, p.carry, p.totals, (*p.grid, 1),
                 (*p.block, 1))


def _steps(kind: str, dtype: DType, rows: plan.Rows):
    key = (kind, dtype, rows)
    found = _plans.get(key)
    if found is None:
        passes, levels = plan.plan_scan(rows)
        found = _plans.put(key, (tuple(_step(kind, dtype, p) for p in passes),
                                 tuple(levels)))
    return found


def enqueue_scan(ctx: ExecContext, kind: str, dtype: DType, rows: plan.Rows, src: int,
                 dst: int, op: str) -> None:
    """Enqueue the inclusive scan of ``rows`` (a non-empty problem over ``src``, results
    into ``dst``; ``src == dst`` scans in place when both fragments agree)."""
    steps, levels = _steps(kind, dtype, rows)
    pdtype = partial_dtype(kind, dtype)
    bufs = [ctx.alloc(pdtype, (lv.size,), op) for lv in levels]  # freed on return
    ptr = {"in": src, "out": dst} | {i: b.data_ptr() for i, b in enumerate(bufs)}
    for st in steps:
        rin, st_in, rout, st_out, counts = st.args
        carry = (ptr[st.carry], levels[st.carry].rs, levels[st.carry].ts) \
            if st.carry is not None else (0, 0, 0)
        tot = (ptr[st.totals], levels[st.totals].rs, levels[st.totals].ts) \
            if st.totals is not None else (0, 0, 0)
        out_ptr = ptr[st.dst] if st.dst is not None else 0
        fn = ctx.function("scan", st.expression)
        ctx.prepare(("scan", st.expression, st.block), fn, st.codes, block=st.block,
                    op=op).run3(st.grid, ptr[st.src], rin, st_in, out_ptr, rout, st_out,
                                *counts, *carry, *tot)


def _scan(ctx: ExecContext, kind: str, x, axis, reverse, op: str) -> Tensor:
    buf = resident(ctx, x, op)
    ax, rev = shp.infer_scan(kind, x.dtype, x.shape, axis, reverse, op)
    out = ctx.alloc(x.dtype, x.shape, op)
    if out.size == 0:
        return out
    rows = plan.rows_of(x.shape, x.strides, x.offset, out.strides, 0, ax, rev)
    enqueue_scan(ctx, kind, x.dtype, rows, buf.ptr, out.data_ptr(), op)
    return out


METHODS: tuple[tuple[str, Callable], ...] = (
    ("cumsum", cumsum), ("cumsum_read", cumsum_read),
    ("cumprod", cumprod), ("cumprod_read", cumprod_read),
    ("cummax", cummax), ("cummax_read", cummax_read),
    ("cummin", cummin), ("cummin_read", cummin_read),
)
