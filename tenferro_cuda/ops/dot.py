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
compare) skips validation of those and planning; anything else re-plans the slot.
``slot=None`` means no caching. ``dot_general_cache_clear`` drops slots (and their
temporaries).
"""

from __future__ import annotations

from ..configs.dot import OVERWRITE, DotGeneralAccumulation, DotGeneralConfig
from ..errors import ValidationError
from ..shapes import dot as shapes_dot
from ..tensor import Tensor
from .dot_exec import COMPLEX, INTEGER, DotExecOps
from .dot_grouped import GroupedGemmOps
from .dot_plan import plan_cached

__all__ = ["DotOps"]

_SLOTS_KEY = ("dot", "slots")
_UNIT = {0: (1, 0), 1: (1.0, 0.0), 2: (1 + 0j, 0j)}  # (alpha, beta) of a plain product



class _Slot:
    """A cache slot: the key it was planned for, the plan, its staging temporaries, the
    bound cuBLAS call (plans without staging) and the dtype class (0 int, 1 real,
    2 complex) for the scalar check."""

    __slots__ = ("key", "config", "plan", "temps", "call", "kind")

    def __init__(self, key, config, plan, call, kind: int) -> None:
        self.key = key
        self.config = config
        self.plan = plan
        self.temps = [None, None, None]
        self.call = call
        self.kind = kind


def _slot_key(lhs, rhs, out, acc: DotGeneralAccumulation) -> tuple:
    return (lhs.shape, lhs.strides, rhs.shape, rhs.strides, out.shape, out.strides,
            lhs.dtype, rhs.dtype, out.dtype, acc.lhs_conj, acc.rhs_conj)


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
        self._begin(op)
        self._resident(lhs, op, "lhs")
        self._resident(rhs, op, "rhs")
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
        self._resident(lhs, op, "lhs")
        self._resident(rhs, op, "rhs")
        self._resident(out, op, "out")
        slots = state.prepared.get(_SLOTS_KEY)
        if slots is None:
            slots = state.prepared[_SLOTS_KEY] = {}
        slot = slots.get(cache_slot)
        key = _slot_key(lhs, rhs, out, accumulation) if isinstance(
            accumulation, DotGeneralAccumulation) else None
        if slot is not None and slot.key == key and (
                slot.config is config or slot.config == config):
            if shapes_dot.overlaps(out, lhs) or shapes_dot.overlaps(out, rhs):
                raise ValidationError("out overlaps an input; write to a separate buffer",
                                      op=op)
            if slot.kind == 2:
                alpha, beta = complex(accumulation.alpha), complex(accumulation.beta)
            elif slot.kind == 1 and accumulation._kind < 2:
                alpha, beta = float(accumulation.alpha.real), float(accumulation.beta.real)
            else:
                alpha, beta = shapes_dot.scalars(accumulation, lhs.dtype, op)
            if slot.call is not None:
                slot.call.run(lhs, rhs, out, alpha, beta, op)
                return
        else:
            plan, alpha, beta = self._dot_prepare(op, lhs, rhs, config, accumulation, out)
            dtype = lhs.dtype
            kind = 2 if dtype in COMPLEX else int(dtype not in INTEGER)
            call = self._dot_prepared(plan, dtype, config.precision, op)
            slot = slots[cache_slot] = _Slot(key, config, plan, call, kind)
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
        self._resident(lhs, op, "lhs")
        self._resident(rhs, op, "rhs")
        self._resident(out, op, "out")
        plan, alpha, beta = self._dot_prepare(op, lhs, rhs, config, accumulation, out)
        self._dot_run(plan, lhs, rhs, out, lhs.dtype, alpha, beta, config.precision, op)
