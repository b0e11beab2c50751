"""The launch steps of a reduction: one ``Step`` per kernel pass of the plan that
``shapes/reduction_plan.py`` makes for a layout, cached per (device, layout); and the
device occupancy the planner sizes its split passes by (``resident_blocks``, also used by
the BLAS-1 family).

A ``Step`` holds everything of a launch but the source and destination pointers: the
name expression, the argument codes and constant arguments, the grid and block, and the
partials it writes. ``reduction.reduce`` prepares each step's launch on the context
(``ctx.prepare``) and writes the head (source, constants, destination) per call.
"""

from __future__ import annotations

from typing import NamedTuple

from ...dtypes import DType
from ...exec.context import ExecContext
from ...kernels.args import layout_bytes
from ...kernels.families import reduce as fam
from ...memo import BoundedCache
from ...shapes.reduction_plan import BLOCK, Machine, RowPass, classify, plan_reduce
from ...tensor import _Strided

__all__ = ["Step", "steps_for", "machine", "resident_blocks", "expression", "row_codes",
           "col_codes"]

CACHE_MAX = 2048
_plans: BoundedCache = BoundedCache(CACHE_MAX)  # (device, layout, axes) -> steps
_exprs: BoundedCache = BoundedCache(CACHE_MAX)  # instantiation -> name expression
_occupancy: BoundedCache = BoundedCache(CACHE_MAX)  # (device, family, expression) -> blocks


def expression(entry: str, kind: str, dtype: DType, src: DType, dst: DType, index: str) -> str:
    """The name expression of a ``reduce`` instantiation (memoized)."""
    key = (entry, kind, dtype, src, dst, index)
    expr = _exprs.get(key)
    if expr is None:
        expr = _exprs.put(key, fam.FAMILY.entry(entry).expression(
            *fam.targs(kind, dtype, src, dst, index)))
    return expr


def _x(index: str) -> str:
    return "I" if index == "tf::u32" else "Q"


def row_codes(index: str) -> str:
    """Argument codes of ``reduce_rows`` (see ptx/reduce.cu for the parameter list)."""
    x = _x(index)
    return f"PLL{x}q{x}{x}{x}{x}iiP"


def col_codes(index: str) -> str:
    """Argument codes of ``reduce_cols``."""
    x = _x(index)
    return f"PLLL{x}q{x}qq{x}{x}{x}qiP"


class Step(NamedTuple):
    """One prepared launch: everything but the source and destination pointers."""

    expression: str
    key: tuple
    codes: str
    args: tuple
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    partial: tuple[DType, int] | None  # (dtype, elements) of the partials it writes


def _step(kind: str, dtype: DType, pdtype: DType, p) -> Step:
    src = pdtype if p.src_partial else dtype
    dst = pdtype if p.dst_partial else dtype
    # partials -> partials of float16/bfloat16 is the float32 operator's pass
    odt = DType.FLOAT32 if src is dst is pdtype and pdtype is not dtype else dtype
    partial = (pdtype, p.out_size) if p.dst_partial else None
    if isinstance(p, RowPass):
        args: tuple[bytes | int, ...] = (
            layout_bytes(p.kept.shape, p.kept.strides, p.kept.offset),
            layout_bytes(p.outer.shape, p.outer.strides), p.run, p.run_stride, p.total,
            p.chunk, p.nchunks, p.nitems, p.group, int(p.flat))
        expr = expression("reduce_rows", kind, odt, src, dst, p.index)
        block = (BLOCK, 1, 1)
        return Step(expr, ("reduction", expr, block), row_codes(p.index), args,
                    (p.blocks, 1, 1), block, partial)
    args = (layout_bytes(p.oin.shape, p.oin.strides, p.oin.offset),
            layout_bytes(p.oin.shape, p.oout), layout_bytes(p.outer.shape, p.outer.strides),
            p.run, p.rs, p.ncols, p.col_in, p.col_out, p.total, p.chunk, p.nitems, p.plane,
            int(p.vec))
    expr = expression("reduce_cols", kind, odt, src, dst, p.index)
    block = (p.block[0], p.block[1], 1)
    return Step(expr, ("reduction", expr, block), col_codes(p.index), args,
                (p.grid[0], p.grid[1], 1), block, partial)


def steps_for(ctx: ExecContext, kind: str, x: _Strided, ax: tuple[int, ...],
              aligned: bool) -> tuple[Step, ...] | None:
    """The launch steps of this reduction (cached per device and layout), None for a
    copy of the kept axes (every reduced axis has extent 1)."""
    key = (ctx.runtime.identity.serial, kind, x.dtype, x.shape, x.strides, x.offset, ax,
           aligned)
    try:
        return _plans[key]
    except KeyError:
        pass
    prob = classify(x.shape, x.strides, x.offset, ax)
    pdtype = fam.partial_dtype(kind, x.dtype)
    m = machine(ctx, kind, x.dtype, prob.path if prob.red.shape else "rows")
    plan = plan_reduce(prob, x.dtype.itemsize, pdtype.itemsize, m, aligned)
    steps = None if plan.kind == "copy" else \
        tuple(_step(kind, x.dtype, pdtype, p) for p in plan.passes)
    return _plans.put(key, steps)


# --- device occupancy (a split pass is one even wave) ------------------------------------
def machine(ctx: ExecContext, kind: str, dtype: DType, path: str) -> Machine:
    """Resident blocks of the first pass's kernel (the row or the column kernel)."""
    entry = "reduce_rows" if path == "rows" else "reduce_cols"
    blocks = resident_blocks(ctx, "reduce",
                             expression(entry, kind, dtype, dtype, dtype, "tf::u32"))
    return Machine(blocks, blocks)


def resident_blocks(ctx: ExecContext, family: str, expression: str) -> int:
    """Blocks of BLOCK threads of ``expression`` that fit on the whole device at once."""
    key = (ctx.runtime.identity.serial, family, expression)
    blocks = _occupancy.get(key)
    if blocks is None:
        regs = ctx.function_registers(ctx.function(family, expression))
        per_warp = -(-max(regs, 1) * 32 // 256) * 256  # registers go by 256 per warp
        by_regs = 65536 // (per_warp * (BLOCK // 32))
        threads = 1536 if ctx.info.compute_capability in ((8, 6), (8, 7), (8, 9)) else 2048
        per_sm = max(1, min(threads // BLOCK, by_regs))
        blocks = _occupancy.put(key, per_sm * ctx.info.multiprocessor_count)
    return blocks
