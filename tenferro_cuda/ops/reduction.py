"""Reductions: ``reduce_sum``, ``reduce_prod``, ``reduce_max``, ``reduce_min`` and their
``_read`` forms (the same operations; every form accepts tensors and views).

Semantics (shapes/reduction.py): ``axes`` are distinct ints in ``range(rank)``, removed
from the result; the result dtype is the input dtype (integer sums and products wrap,
float16/bfloat16 accumulate in float32); zero reduced elements give 0 / 1, and raise for
max/min; NaN propagates through max/min. How it runs (shapes/reduction_plan.py): one or
two kernel passes over memory, chunk partials in a pool buffer that is freed (stream
ordered) when the call returns, no atomics: the same input gives the same bits every run.
Everything is enqueued on the session stream; nothing waits for the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ..dtypes import DType
from ..kernels import device
from ..kernels.args import layout_bytes
from ..kernels.families import reduce as fam
from ..shapes import reduction as shp
from ..shapes.reduction_plan import BLOCK, Machine, RowPass, classify, plan_reduce
from ..tensor import Tensor, TensorView
from ._base import OpsBase, _buf

_CACHE_MAX = 2048
_plans: dict = {}  # validated layout -> prepared steps
_calls: dict = {}  # (layout, axes exactly as passed: a tuple of ints) -> validated call
_exprs: dict = {}
_occupancy: dict = {}


def _expression(entry: str, kind: str, dtype: DType, src: DType, dst: DType, index: str) -> str:
    key = (entry, kind, dtype, src, dst, index)
    expr = _exprs.get(key)
    if expr is None:
        expr = _exprs[key] = fam.FAMILY.entry(entry).expression(
            *fam.targs(kind, dtype, src, dst, index))
    return expr


def _layout(shape, strides, offset: int = 0) -> bytes:
    return layout_bytes(shape, strides, offset)


def _x(index: str) -> str:
    return "I" if index == "tf::u32" else "Q"


def row_codes(index: str) -> str:
    """ArgPack codes of ``reduce_rows`` (see ptx/reduce.cu for the parameter list)."""
    x = _x(index)
    return f"PLL{x}q{x}{x}{x}{x}iiP"


def col_codes(index: str) -> str:
    """ArgPack codes of ``reduce_cols``."""
    x = _x(index)
    return f"PLLL{x}q{x}qq{x}{x}{x}qiP"


class _Step(NamedTuple):
    """One prepared launch: everything but the source and destination pointers."""

    expression: str
    key: tuple
    codes: str
    args: tuple
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    partial: tuple[DType, int] | None  # (dtype, elements) of the partials it writes


def _step(kind: str, dtype: DType, pdtype: DType, p) -> _Step:
    src = pdtype if p.src_partial else dtype
    dst = pdtype if p.dst_partial else dtype
    # partials -> partials of float16/bfloat16 is the float32 operator's pass
    odt = DType.FLOAT32 if src is dst is pdtype and pdtype is not dtype else dtype
    partial = (pdtype, p.out_size) if p.dst_partial else None
    if isinstance(p, RowPass):
        args: tuple[bytes | int, ...] = (
            _layout(p.kept.shape, p.kept.strides, p.kept.offset),
            _layout(p.outer.shape, p.outer.strides), p.run, p.run_stride, p.total,
            p.chunk, p.nchunks, p.nitems, p.group, int(p.flat))
        return _Step(_expression("reduce_rows", kind, odt, src, dst, p.index),
                     ("reduce_rows", p.index), row_codes(p.index), args, (p.blocks, 1, 1),
                     (BLOCK, 1, 1), partial)
    args = (_layout(p.oin.shape, p.oin.strides, p.oin.offset), _layout(p.oin.shape, p.oout),
            _layout(p.outer.shape, p.outer.strides), p.run, p.rs, p.ncols, p.col_in,
            p.col_out, p.total, p.chunk, p.nitems, p.plane, int(p.vec))
    return _Step(_expression("reduce_cols", kind, odt, src, dst, p.index),
                 ("reduce_cols", p.index), col_codes(p.index), args, (p.grid[0], p.grid[1], 1),
                 (p.block[0], p.block[1], 1), partial)


class ReductionOps(OpsBase):
    def reduce_sum(self, input: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
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
        return self._reduce("sum", input, axes, "reduce_sum")

    def reduce_sum_read(self, input: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
        """``reduce_sum`` of an owned tensor or a borrowed view (see ``reduce_sum``)."""
        return self._reduce("sum", input, axes, "reduce_sum_read")

    def reduce_prod(self, input: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
        """Product over ``axes``; like ``reduce_sum`` (the product of zero elements is 1)."""
        return self._reduce("prod", input, axes, "reduce_prod")

    def reduce_prod_read(self, input: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
        """``reduce_prod`` of an owned tensor or a borrowed view."""
        return self._reduce("prod", input, axes, "reduce_prod_read")

    def reduce_max(self, input: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
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
        return self._reduce("max", input, axes, "reduce_max")

    def reduce_max_read(self, input: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
        """``reduce_max`` of an owned tensor or a borrowed view."""
        return self._reduce("max", input, axes, "reduce_max_read")

    def reduce_min(self, input: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
        """Minimum over ``axes``; NaN propagates (see ``reduce_max``)."""
        return self._reduce("min", input, axes, "reduce_min")

    def reduce_min_read(self, input: Tensor | TensorView, axes: Sequence[int]) -> Tensor:
        """``reduce_min`` of an owned tensor or a borrowed view."""
        return self._reduce("min", input, axes, "reduce_min_read")

    # --- implementation ---------------------------------------------------------------
    def _reduce(self, kind: str, x, axes, op: str) -> Tensor:
        self._begin(op)
        self._resident(x, op)
        aligned = x.base.buffer.ptr % 16 == 0  # pool buffers are; adopted ones may not be
        key = None
        if type(axes) is tuple and all(type(a) is int for a in axes):
            key = (self._rt.identity.serial, kind, x.dtype, x.shape, x.strides, x.offset,
                   axes, aligned)
        call = _calls.get(key) if key is not None else None
        if call is None:  # validate (raises before anything is allocated) and plan
            ax, out_shape, count = shp.infer_reduce(kind, x.dtype, x.shape, axes, op)
            work = count != 0 and 0 not in out_shape
            steps = self._reduce_steps(kind, x, ax, aligned) if work else None
            call = (ax, out_shape, count, steps)
            if key is not None:
                if len(_calls) >= _CACHE_MAX:
                    _calls.clear()
                _calls[key] = call
        ax, out_shape, count, steps = call
        out = self._alloc(x.dtype, out_shape, op)
        if out.size == 0:
            return out
        if count == 0:
            self._fill(out, 0 if kind == "sum" else 1, op)
            return out
        if steps is None:  # nothing reduced (extent-1 axes): a copy of the kept axes
            keep = [i for i in range(x.ndim) if i not in ax]
            src = TensorView(x.base, out_shape, [x.strides[i] for i in keep], x.offset)
            self._copy_into(src, out, op)
            return out
        src_ptr = x.base.buffer.ptr
        alive = []  # partial buffers: freed (stream-ordered, after their readers) on return
        for st in steps:
            if st.partial is None:
                dst_ptr = _buf(out).ptr
            else:
                part = self._alloc(st.partial[0], (st.partial[1],), op)
                alive.append(part)
                dst_ptr = _buf(part).ptr
            params = self._pack(st.key, st.codes).pack(src_ptr, *st.args, dst_ptr)
            self._launch(self._fn("reduce", st.expression), st.grid, st.block, params, op)
            src_ptr = dst_ptr
        return out

    def _reduce_steps(self, kind: str, x, ax: tuple[int, ...],
                      aligned: bool) -> tuple[_Step, ...] | None:
        """The prepared launches of this reduction (cached per layout), None for a copy."""
        key = (self._rt.identity.serial, kind, x.dtype, x.shape, x.strides, x.offset, ax,
               aligned)
        try:
            return _plans[key]
        except KeyError:
            pass
        if len(_plans) >= _CACHE_MAX:
            _plans.clear()
        prob = classify(x.shape, x.strides, x.offset, ax)
        pdtype = fam.partial_dtype(kind, x.dtype)
        m = self._machine(kind, x.dtype, prob.path if prob.red.shape else "rows")
        plan = plan_reduce(prob, x.dtype.itemsize, pdtype.itemsize, m, aligned)
        steps = None if plan.kind == "copy" else \
            tuple(_step(kind, x.dtype, pdtype, p) for p in plan.passes)
        _plans[key] = steps
        return steps

    # --- device occupancy (a split pass is one even wave) --------------------------------
    def _machine(self, kind: str, dtype: DType, path: str) -> Machine:
        """Resident blocks of the first pass's kernel (the row or the column kernel)."""
        entry = "reduce_rows" if path == "rows" else "reduce_cols"
        blocks = resident_blocks(self, "reduce",
                                 _expression(entry, kind, dtype, dtype, dtype, "tf::u32"))
        return Machine(blocks, blocks)


def resident_blocks(session: OpsBase, family: str, expression: str) -> int:
    """Blocks of BLOCK threads of ``expression`` that fit on the whole device at once."""
    rt = session._rt
    key = (rt.identity.serial, family, expression)
    blocks = _occupancy.get(key)
    if blocks is None:
        regs = device.function_attributes(session._fn(family, expression))["registers"]
        per_warp = -(-max(regs, 1) * 32 // 256) * 256  # registers go by 256 per warp
        by_regs = 65536 // (per_warp * (BLOCK // 32))
        threads = 1536 if rt.info.compute_capability in ((8, 6), (8, 7), (8, 9)) else 2048
        per_sm = max(1, min(threads // BLOCK, by_regs))
        blocks = _occupancy[key] = per_sm * rt.info.multiprocessor_count
    return blocks
