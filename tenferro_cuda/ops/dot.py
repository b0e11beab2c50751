"""dot_general and its accumulating, caller-output and cached forms; grouped GEMM.

Semantics (``jax.lax.dot_general``): the result has shape ``[batch..., lhs free...,
rhs free...]``; ``dot_general_read_into_accum`` computes
``out = alpha * op(lhs) . op(rhs) + beta * out`` where ``op`` conjugates when
``DotGeneralAccumulation`` asks (complex dtypes). Float and complex products run on cuBLAS
(``ops/dot_exec.py``), integer products on ``ptx/dot_int.cu`` with wrapping arithmetic.
Layouts are mapped onto cuBLAS transposes and strided batches without copies whenever the
strides allow (``ops/dot_plan.py``). A missing cuBLAS raises ``BackendSourceError``
naming the library; there is no other path for float dtypes.

Cached form: ``dot_general_read_into_accum_cached(slot, ...)`` keeps, per slot of the
calling thread's session stream, the plan and its staging temporaries. A call whose
shapes, strides, dtypes, config and conjugation flags equal the slot's (one tuple
compare) skips validation of those and planning; the same ``DotGeneralAccumulation``
object as the slot's last call also skips the scalar checks. Anything else re-plans the
slot. ``slot=None`` means no caching. ``dot_general_cache_clear`` drops slots (and their
temporaries).

Repeated ``dot_general`` calls: per thread, a bounded memo keyed by the operands'
shapes, strides and dtypes and the config remembers requests already validated whose
plan runs on cuBLAS without staging; from the second sighting of a key on, a call binds
the cuBLAS call once and then only allocates the result and launches. Residency is
checked on every call; anything the key does not cover takes the full path.
"""

from __future__ import annotations

from ..configs.dot import OVERWRITE, DotGeneralAccumulation, DotGeneralConfig
from ..errors import ValidationError
from ..shapes import dot as shapes_dot
from ..tensor import Tensor
from ._base import _buf
from .dot_exec import COMPLEX, INTEGER, DotExecOps
from .dot_grouped import GroupedGemmOps
from .dot_plan import plan_cached

__all__ = ["DotOps"]

_SLOTS_KEY = ("dot", "slots")
_REPEAT_KEY = ("dot", "repeat")
REPEAT_LIMIT = 256  # remembered dot_general requests per thread (cleared when full)
_UNIT = {0: (1, 0), 1: (1.0, 0.0), 2: (1 + 0j, 0j)}  # (alpha, beta) of a plain product


class _Slot:
    """A cache slot: the key it was planned for (operand shapes, strides, dtypes), the
    config and conjugation flags, the plan, its staging temporaries, the bound cuBLAS
    call (plans without staging), the dtype class (0 int, 1 real, 2 complex) for the
    scalar check, the itemsize, and the last accumulation with its checked
    (alpha, beta)."""

    __slots__ = ("key", "config", "conj", "plan", "temps", "call", "kind", "item", "acc",
                 "alpha", "beta")

    def __init__(self, key, config, plan, call, kind: int, item: int,
                 acc: DotGeneralAccumulation, alpha, beta) -> None:
        self.key = key
        self.config = config
        self.conj = (acc.lhs_conj, acc.rhs_conj)
        self.plan = plan
        self.temps = [None, None, None]
        self.call = call
        self.kind = kind
        self.item = item
        self.acc, self.alpha, self.beta = acc, alpha, beta


class _Repeat:
    """A validated ``dot_general`` request that runs on cuBLAS without staging: the
    result's shape and dtype, its itemsize, the unit scalars and (once bound) the call."""

    __slots__ = ("shape", "dtype", "item", "one", "zero", "call")

    def __init__(self, shape, dtype, one, zero) -> None:
        self.shape, self.dtype, self.item = shape, dtype, dtype.itemsize
        self.one, self.zero = one, zero
        self.call = None


def _plain(plan) -> bool:
    """True for a plan that runs as one cuBLAS call on the operands as they are."""
    return not (plan.empty or plan.kzero or plan.lhs_perm is not None
                or plan.rhs_perm is not None or plan.out_perm is not None)


class DotOps(GroupedGemmOps, DotExecOps):
    """The dot family's session methods."""

    def dot_general(self, lhs, rhs, config: DotGeneralConfig) -> Tensor:
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
        state = self._begin(op)
        lb, rb, _ = self._dot_resident(op, lhs, rhs)
        memo = state.prepared.get(_REPEAT_KEY)
        if memo is None:
            memo = state.prepared[_REPEAT_KEY] = {}
        key = (lhs.shape, lhs.strides, rhs.shape, rhs.strides, lhs.dtype, rhs.dtype, config)
        try:
            seen = memo.get(key)
        except TypeError:  # an unhashable config: rejected by the checks below
            seen = None
        if seen is not None and seen.call is not None:  # validated and planned before
            item = seen.item
            out = self._alloc(seen.dtype, seen.shape, op)
            seen.call.run(lb.buffer.ptr + lhs.offset * item, rb.buffer.ptr + rhs.offset * item,
                          _buf(out).ptr, seen.one, seen.zero, op)
            return out
        dtype = lhs.dtype
        shape = shapes_dot.infer(lhs.shape, rhs.shape, dtype, rhs.dtype, config, op)
        blas = dtype not in INTEGER
        if blas:
            self._dot_handle(op)
        out = self._alloc(dtype, shape, op)
        plan = plan_cached((lhs.shape, rhs.shape, shape), (lhs.strides, rhs.strides, out.strides),
                           config, False, False, blas)
        one, zero = _UNIT[(dtype in COMPLEX) + blas]
        self._dot_run(plan, lhs, rhs, out, dtype, one, zero, config.precision, op)
        if blas and _plain(plan):
            if seen is None:  # first sighting: remember; bind the call on the second
                if len(memo) >= REPEAT_LIMIT:
                    memo.clear()
                memo[key] = _Repeat(shape, dtype, one, zero)
            else:
                seen.call = self._dot_prepared(plan, dtype, config.precision, op)
        return out

    def dot_general_read_into(self, lhs, rhs, config: DotGeneralConfig, out) -> None:
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
        self._dot_accum("dot_general_read_into", lhs, rhs, config, OVERWRITE, out)

    def dot_general_read_into_accum(self, lhs, rhs, config: DotGeneralConfig,
                                    accumulation: DotGeneralAccumulation, out) -> None:
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
        self._dot_accum("dot_general_read_into_accum", lhs, rhs, config, accumulation, out)

    def dot_general_read_into_accum_cached(self, cache_slot: int | None, lhs, rhs,
                                           config: DotGeneralConfig,
                                           accumulation: DotGeneralAccumulation,
                                           out) -> None:
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
            self._dot_accum(op, lhs, rhs, config, accumulation, out)
            return
        if type(cache_slot) is not int or cache_slot < 0:
            raise ValidationError(f"cache_slot must be an int >= 0 or None "
                                  f"(got {cache_slot!r})", op=op)
        state = self._begin(op)
        lb, rb, ob = self._dot_resident(op, lhs, rhs, out)
        slots = state.prepared.get(_SLOTS_KEY)
        if slots is None:
            slots = state.prepared[_SLOTS_KEY] = {}
        slot = slots.get(cache_slot)
        key = (lhs.shape, lhs.strides, rhs.shape, rhs.strides, out.shape, out.strides,
               lhs.dtype, rhs.dtype, out.dtype)
        if slot is not None and slot.key == key and (
                slot.config is config or slot.config == config) and (
                accumulation is slot.acc or (
                    isinstance(accumulation, DotGeneralAccumulation)
                    and (accumulation.lhs_conj, accumulation.rhs_conj) == slot.conj)):
            if (ob is lb or ob is rb) and (
                    shapes_dot.overlaps(out, lhs) or shapes_dot.overlaps(out, rhs)):
                raise ValidationError("out overlaps an input; write to a separate buffer",
                                      op=op)
            if accumulation is slot.acc:  # checked for this slot's dtype before
                alpha, beta = slot.alpha, slot.beta
            else:
                if slot.kind == 2:
                    alpha, beta = complex(accumulation.alpha), complex(accumulation.beta)
                elif slot.kind == 1 and accumulation._kind < 2:
                    alpha = float(accumulation.alpha.real)
                    beta = float(accumulation.beta.real)
                else:
                    alpha, beta = shapes_dot.scalars(accumulation, lhs.dtype, op)
                slot.acc, slot.alpha, slot.beta = accumulation, alpha, beta
            call = slot.call
            if call is not None:
                item = slot.item
                call.run(lb.buffer.ptr + lhs.offset * item, rb.buffer.ptr + rhs.offset * item,
                         ob.buffer.ptr + out.offset * item, alpha, beta, op)
                return
        else:
            plan, alpha, beta = self._dot_prepare(op, lhs, rhs, config, accumulation, out)
            dtype = lhs.dtype
            kind = 2 if dtype in COMPLEX else int(dtype not in INTEGER)
            call = self._dot_prepared(plan, dtype, config.precision, op)
            slot = slots[cache_slot] = _Slot(key, config, plan, call, kind, dtype.itemsize,
                                             accumulation, alpha, beta)
        self._dot_run(slot.plan, lhs, rhs, out, lhs.dtype, alpha, beta, config.precision, op,
                      slot.temps)

    def dot_general_cache_clear(self, cache_slot: int | None = None) -> None:
        """Forget cache slots and free their staging temporaries (stream-ordered).

        Parameters
        ----------
        cache_slot : int or None
            The slot to forget; None forgets every slot of this thread's session stream.
        """
        op = "dot_general_cache_clear"
        state = self._begin(op)
        slots = state.prepared.get(_SLOTS_KEY)
        if slots:
            if cache_slot is None:
                slots.clear()
            else:
                slots.pop(cache_slot, None)

    # --- shared ----------------------------------------------------------------------------
    def _dot_prepare(self, op: str, lhs, rhs, config, accumulation, out):
        """Validate a caller-output request completely and plan it (no launch).
        Returns (plan, alpha, beta)."""
        dtype = lhs.dtype
        shape = shapes_dot.infer(lhs.shape, rhs.shape, dtype, rhs.dtype, config, op)
        alpha, beta = shapes_dot.scalars(accumulation, dtype, op)
        shapes_dot.check_out(out, shape, dtype, op, (lhs, rhs))
        blas = dtype not in INTEGER
        if blas:
            self._dot_handle(op)
        conj = dtype in COMPLEX
        plan = plan_cached((lhs.shape, rhs.shape, shape), (lhs.strides, rhs.strides, out.strides),
                           config, conj and accumulation.lhs_conj,
                           conj and accumulation.rhs_conj, blas)
        return plan, alpha, beta

    def _dot_accum(self, op: str, lhs, rhs, config, accumulation, out) -> None:
        self._begin(op)
        self._dot_resident(op, lhs, rhs, out)
        plan, alpha, beta = self._dot_prepare(op, lhs, rhs, config, accumulation, out)
        self._dot_run(plan, lhs, rhs, out, lhs.dtype, alpha, beta, config.precision, op)
