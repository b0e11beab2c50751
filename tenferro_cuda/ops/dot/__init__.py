"""dot_general and its accumulating, caller-output and cached forms; grouped GEMM.

Semantics (``jax.lax.dot_general``): the result has shape ``[batch..., lhs free...,
rhs free...]``; ``dot_general_read_into_accum`` computes
``out = alpha * op(lhs) . op(rhs) + beta * out`` where ``op`` conjugates when
``DotGeneralAccumulation`` asks (complex dtypes). Float and complex products run on cuBLAS
(``ctx.blas``, ``exec/blas.py``), integer products on ``ptx/dot_int.cu`` with wrapping
arithmetic (``run.py``). Layouts are mapped onto cuBLAS transposes and strided batches
without copies whenever the strides allow (``plan.py``). A missing cuBLAS raises
``BackendSourceError`` naming the library; there is no other path for float dtypes.

A caller's ``out`` may not share device memory with ``lhs`` or ``rhs`` (judged by byte
ranges, ``shapes/aliasing``: a reshape of an input, a slice of it or a second adoption of
the same foreign buffer all count), on every path, warm ones included.

Cached form: ``dot_general_read_into_accum_cached(slot, ...)`` keeps, per slot of the
execution context (``ctx.dot_slots``), the plan and its staging temporaries. A call whose
shapes, strides, dtypes, config and conjugation flags equal the slot's (one tuple
compare) skips validation of those and planning; the same ``DotGeneralAccumulation``
object as the slot's last call also skips the scalar checks. Residency and the overlap of
``out`` with the inputs (an address-range test on extents remembered by the slot) are
checked on every call. Anything else re-plans the slot. ``slot=None`` means no caching.
``dot_general_cache_clear`` drops slots (and their temporaries).

Repeated ``dot_general`` calls: per context, a bounded memo (``ctx.memo``) keyed by the
operands' shapes, strides and dtypes and the config remembers requests already validated
whose plan runs on cuBLAS without staging; from the second sighting of a key on, a call
binds the cuBLAS call once and then only allocates the result and launches. Residency is
checked on every call; anything the key does not cover takes the full path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...configs.dot import OVERWRITE, DotGeneralAccumulation, DotGeneralConfig
from ...errors import ValidationError
from ...exec.context import ExecContext
from ...memo import BoundedCache
from ...shapes import dot as shapes_dot
from ...shapes.aliasing import check_output, check_writable
from ...tensor import Tensor, TensorView, _Strided
from .grouped import grouped_gemm
from .plan import GemmPlan, plan_cached
from .run import COMPLEX, INTEGER, bound_call, execute, resident_buffers

__all__ = ["METHODS"]

_REPEAT_KEY = ("dot", "repeat")
REPEAT_LIMIT = 256  # remembered dot_general requests per context
_UNIT = {0: (1, 0), 1: (1.0, 0.0), 2: (1 + 0j, 0j)}  # (alpha, beta) of a plain product
_NONE = (1 << 70, -(1 << 70))  # the extent of an empty operand: overlaps nothing
_ROLES = ("lhs", "rhs")


def _extent(t: _Strided, item: int) -> tuple[int, int]:
    """[low, high) byte offsets addressed by ``t`` relative to its element 0."""
    if t.size == 0:
        return _NONE
    lo, hi = t.span()
    return (lo - t.offset) * item, (hi - t.offset) * item


class _Slot:
    """A cache slot: the key it was planned for (operand shapes, strides, dtypes), the
    config and conjugation flags, the plan, its staging temporaries, the bound cuBLAS
    call (plans without staging), the dtype class (0 int, 1 real, 2 complex) for the
    scalar check, the itemsize, the byte extents of lhs, rhs and out relative to their
    element 0 (the overlap test of warm calls), and the last accumulation with its
    checked (alpha, beta)."""

    __slots__ = ("key", "config", "conj", "plan", "temps", "call", "kind", "item", "acc",
                 "alpha", "beta", "l_lo", "l_hi", "r_lo", "r_hi", "o_lo", "o_hi")

    def __init__(self, key: tuple, config: DotGeneralConfig, plan: GemmPlan, call: Any,
                 kind: int, item: int, acc: DotGeneralAccumulation, alpha: Any, beta: Any,
                 operands: tuple[_Strided, _Strided, _Strided]) -> None:
        self.key = key
        self.config = config
        self.conj = (acc.lhs_conj, acc.rhs_conj)
        self.plan = plan
        self.temps: list = [None, None, None]
        self.call = call
        self.kind = kind
        self.item = item
        self.acc, self.alpha, self.beta = acc, alpha, beta
        lhs, rhs, out = operands
        self.l_lo, self.l_hi = _extent(lhs, item)
        self.r_lo, self.r_hi = _extent(rhs, item)
        self.o_lo, self.o_hi = _extent(out, item)


class _Repeat:
    """A validated ``dot_general`` request that runs on cuBLAS without staging: the
    result's shape and dtype, its itemsize, the unit scalars and (once bound) the call."""

    __slots__ = ("shape", "dtype", "item", "one", "zero", "call")

    def __init__(self, shape: tuple[int, ...], dtype: Any, one: Any, zero: Any) -> None:
        self.shape, self.dtype, self.item = shape, dtype, dtype.itemsize
        self.one, self.zero = one, zero
        self.call: Any = None


def _plain(plan: GemmPlan) -> bool:
    """True for a plan that runs as one cuBLAS call on the operands as they are."""
    return not (plan.empty or plan.kzero or plan.lhs_perm is not None
                or plan.rhs_perm is not None or plan.out_perm is not None)


def dot_general(ctx: ExecContext, lhs: Tensor | TensorView, rhs: Tensor | TensorView,
                config: DotGeneralConfig) -> Tensor:
    """Contract ``lhs`` with ``rhs`` per ``config`` into a new tensor.

    Parameters
    ----------
    lhs, rhs : Tensor or TensorView
        Device operands of one dtype (not bool).
    config : DotGeneralConfig
        Batch and contracting axes; ``precision``.

    Returns
    -------
    Tensor
        Shape ``[batch..., lhs free..., rhs free...]``, the operands' dtype.
    """
    op = "dot_general"
    a, b, _ = resident_buffers(ctx, op, lhs, rhs)
    memo = ctx.memo.get(_REPEAT_KEY)
    if memo is None:
        memo = ctx.memo.put(_REPEAT_KEY, BoundedCache(REPEAT_LIMIT))
    key = (lhs.shape, lhs.strides, rhs.shape, rhs.strides, lhs.dtype, rhs.dtype, config)
    try:
        seen = memo.get(key)
    except TypeError:  # an unhashable config: rejected by the checks below
        seen = None
    if seen is not None and seen.call is not None:  # validated and planned before
        item = seen.item
        out = ctx.alloc(seen.dtype, seen.shape, op)
        seen.call.run(a.ptr + lhs.offset * item, b.ptr + rhs.offset * item,
                      out.buffer.ptr, seen.one, seen.zero, op)  # type: ignore[union-attr]
        return out
    dtype = lhs.dtype
    shape = shapes_dot.infer(lhs.shape, rhs.shape, dtype, rhs.dtype, config, op)
    blas = dtype not in INTEGER
    if blas:
        ctx.blas(op)  # a missing cuBLAS is reported before anything is allocated
    out = ctx.alloc(dtype, shape, op)
    plan = plan_cached((lhs.shape, rhs.shape, shape), (lhs.strides, rhs.strides, out.strides),
                       config, False, False, blas)
    one, zero = _UNIT[(dtype in COMPLEX) + blas]
    execute(ctx, plan, lhs, rhs, out, dtype, one, zero, config.precision, op)
    if blas and _plain(plan):
        if seen is None:  # first sighting: remember; bind the call on the second
            memo.put(key, _Repeat(shape, dtype, one, zero))
        else:
            seen.call = bound_call(ctx, plan, dtype, config.precision, op)
    return out


def dot_general_read_into(ctx: ExecContext, lhs: Tensor | TensorView,
                          rhs: Tensor | TensorView, config: DotGeneralConfig,
                          out: Tensor | TensorView) -> None:
    """Overwrite ``out`` with ``dot_general(lhs, rhs, config)``.

    Parameters
    ----------
    lhs, rhs : Tensor or TensorView
        Device operands of one dtype.
    config : DotGeneralConfig
        Dimension numbers and precision.
    out : Tensor or TensorView
        The result's shape and dtype, not overlapping an input; its old values are
        not read (NaN included) and nothing outside it is written.
    """
    _accum(ctx, "dot_general_read_into", lhs, rhs, config, OVERWRITE, out)


def dot_general_read_into_accum(ctx: ExecContext, lhs: Tensor | TensorView,
                                rhs: Tensor | TensorView, config: DotGeneralConfig,
                                accumulation: DotGeneralAccumulation,
                                out: Tensor | TensorView) -> None:
    """``out = alpha * op(lhs) . op(rhs) + beta * out`` in place.

    Parameters
    ----------
    lhs, rhs : Tensor or TensorView
        Device operands of one dtype.
    config : DotGeneralConfig
        Dimension numbers and precision.
    accumulation : DotGeneralAccumulation
        ``alpha``, ``beta`` (values of the operands' dtype) and conjugation flags.
    out : Tensor or TensorView
        The result's shape and dtype; any strides that address each element once.
        Only its elements are written. A contraction of length 0 gives
        ``beta * out``; an empty ``out`` is valid (nothing runs).
    """
    _accum(ctx, "dot_general_read_into_accum", lhs, rhs, config, accumulation, out)


def dot_general_read_into_accum_cached(ctx: ExecContext, cache_slot: int | None,
                                       lhs: Tensor | TensorView, rhs: Tensor | TensorView,
                                       config: DotGeneralConfig,
                                       accumulation: DotGeneralAccumulation,
                                       out: Tensor | TensorView) -> None:
    """``dot_general_read_into_accum`` that keeps its plan in ``cache_slot``.

    Parameters
    ----------
    cache_slot : int or None
        A slot number >= 0 of this thread's session stream, or None (no caching).
    lhs, rhs, config, accumulation, out
        As ``dot_general_read_into_accum``.
    """
    op = "dot_general_read_into_accum_cached"
    if cache_slot is None:
        _accum(ctx, op, lhs, rhs, config, accumulation, out)
        return
    a, b, c = resident_buffers(ctx, op, lhs, rhs, out)
    if type(cache_slot) is not int or cache_slot < 0:
        raise ValidationError(f"cache_slot must be an int >= 0 or None "
                              f"(got {cache_slot!r})", op=op)
    slots = ctx.dot_slots
    slot = slots.get(cache_slot)
    key = (lhs.shape, lhs.strides, rhs.shape, rhs.strides, out.shape, out.strides,
           lhs.dtype, rhs.dtype, out.dtype)
    if slot is not None and slot.key == key and (
            slot.config is config or slot.config == config) and (
            accumulation is slot.acc or (
                isinstance(accumulation, DotGeneralAccumulation)
                and (accumulation.lhs_conj, accumulation.rhs_conj) == slot.conj)):
        item = slot.item
        pa = a.ptr + lhs.offset * item
        pb = b.ptr + rhs.offset * item
        pc = c.ptr + out.offset * item
        if c.owner is not None:  # adopted memory may be read-only (_prepare checks it)
            check_writable(out, op)
        lo, hi = pc + slot.o_lo, pc + slot.o_hi
        if (lo < pa + slot.l_hi and pa + slot.l_lo < hi) or (
                lo < pb + slot.r_hi and pb + slot.r_lo < hi):
            check_output(out, (lhs, rhs), _ROLES, op)  # raises: out shares memory
        if accumulation is slot.acc:  # checked for this slot's dtype before
            alpha, beta = slot.alpha, slot.beta
        else:
            try:
                if not accumulation._plain:  # a Fraction, Decimal, np.longdouble, ...
                    alpha, beta = shapes_dot.scalars(accumulation, lhs.dtype, op)
                elif slot.kind == 2:
                    alpha, beta = complex(accumulation.alpha), complex(accumulation.beta)
                elif slot.kind == 1 and accumulation._kind < 2:
                    alpha = float(accumulation.alpha.real)
                    beta = float(accumulation.beta.real)
                else:
                    alpha, beta = shapes_dot.scalars(accumulation, lhs.dtype, op)
            except OverflowError:  # beyond float64: scalars raises the ValidationError
                alpha, beta = shapes_dot.scalars(accumulation, lhs.dtype, op)
            if not shapes_dot.fits_single(alpha, beta) \
                    and lhs.dtype in shapes_dot.SINGLE_SCALED:
                shapes_dot.scalars(accumulation, lhs.dtype, op)  # raises: beyond float32
            slot.acc, slot.alpha, slot.beta = accumulation, alpha, beta
        call = slot.call
        if call is not None:
            call.run(pa, pb, pc, alpha, beta, op)
            return
    else:
        plan, alpha, beta = _prepare(ctx, op, lhs, rhs, config, accumulation, out, (a, b, c))
        dtype = lhs.dtype
        kind = 2 if dtype in COMPLEX else int(dtype not in INTEGER)
        call = bound_call(ctx, plan, dtype, config.precision, op)
        slot = slots[cache_slot] = _Slot(key, config, plan, call, kind, dtype.itemsize,
                                         accumulation, alpha, beta, (lhs, rhs, out))
    execute(ctx, slot.plan, lhs, rhs, out, lhs.dtype, alpha, beta, config.precision, op,
            slot.temps)


def dot_general_cache_clear(ctx: ExecContext, cache_slot: int | None = None) -> None:
    """Forget cache slots and free their staging temporaries (stream-ordered).

    Parameters
    ----------
    cache_slot : int or None
        The slot to forget; None forgets every slot of this thread's session stream.
    """
    if cache_slot is None:
        ctx.dot_slots.clear()
        return
    if type(cache_slot) is not int or cache_slot < 0:  # as dot_general_read_into_accum_cached
        raise ValidationError(f"cache_slot must be an int >= 0 or None (got {cache_slot!r})",
                              op="dot_general_cache_clear")
    ctx.dot_slots.pop(cache_slot, None)


# --- shared ----------------------------------------------------------------------------------
def _near(c: Any, a: Any) -> bool:
    """Whether the address ranges of buffers ``c`` and ``a`` intersect: views of buffers
    that do not cannot share a byte (every element of a view lies in its buffer), so the
    exact test of ``check_output`` runs only when this holds."""
    return c.ptr < a.ptr + a.nbytes and a.ptr < c.ptr + c.nbytes


def _prepare(ctx: ExecContext, op: str, lhs: _Strided, rhs: _Strided,
             config: DotGeneralConfig, accumulation: DotGeneralAccumulation,
             out: _Strided, buffers: tuple[Any, Any, Any]) -> tuple[GemmPlan, Any, Any]:
    """Validate a caller-output request completely and plan it (no launch); ``buffers``
    are ``resident_buffers``'s. Returns (plan, alpha, beta)."""
    dtype = lhs.dtype
    shape = shapes_dot.infer(lhs.shape, rhs.shape, dtype, rhs.dtype, config, op)
    alpha, beta = shapes_dot.scalars(accumulation, dtype, op)
    shapes_dot.check_out(out, shape, dtype, op)
    a, b, c = buffers
    if _near(c, a) or _near(c, b):
        check_output(out, (lhs, rhs), _ROLES, op)
    blas = dtype not in INTEGER
    if blas:
        ctx.blas(op)  # a missing cuBLAS is reported before anything runs
    conj = dtype in COMPLEX
    plan = plan_cached((lhs.shape, rhs.shape, shape), (lhs.strides, rhs.strides, out.strides),
                       config, conj and accumulation.lhs_conj,
                       conj and accumulation.rhs_conj, blas)
    return plan, alpha, beta


def _accum(ctx: ExecContext, op: str, lhs: Any, rhs: Any, config: DotGeneralConfig,
           accumulation: DotGeneralAccumulation, out: Any) -> None:
    buffers = resident_buffers(ctx, op, lhs, rhs, out)
    plan, alpha, beta = _prepare(ctx, op, lhs, rhs, config, accumulation, out, buffers)
    execute(ctx, plan, lhs, rhs, out, lhs.dtype, alpha, beta, config.precision, op)


METHODS: tuple[tuple[str, Callable], ...] = (
    ("dot_general", dot_general),
    ("dot_general_read_into", dot_general_read_into),
    ("dot_general_read_into_accum", dot_general_read_into_accum),
    ("dot_general_read_into_accum_cached", dot_general_read_into_accum_cached),
    ("dot_general_cache_clear", dot_general_cache_clear),
    ("grouped_gemm", grouped_gemm),
)
