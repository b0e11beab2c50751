"""Dtype and shape rules of an ``ElementwiseFusionPlan`` over concrete inputs (pure Python).

Every instruction follows exactly the rules of the operation it names
(``shapes/elementwise.py``): one dtype per instruction (``ValidationError`` kind
``dtype_mismatch``), except a rank-0 real value next to its complex counterpart in
``add sub mul div pow``, which is promoted as the unfused op does; a dtype the operation
does not define raises ``UnsupportedDTypeError``; ``convert`` follows the lattice
(``UnsupportedDTypeConversionError``); operand shapes must be equal or rank 0
(``ValidationError`` kind ``shape_mismatch``). A value is rank 0 exactly when all its
arguments are. Errors name the instruction. Everything is checked before anything is
allocated, for every instruction, also those no output depends on (which are then not
executed).

A valid plan is **declined** (``execute_elementwise_fusion`` returns None) when
- its outputs do not all have one shape (e.g. one is rank 0 and another is not, or two
  depend on unrelated inputs of different shapes);
- outputs depend on more than ``MAX_FUSION_INPUTS`` (16) inputs, it has more than
  ``MAX_FUSION_OUTPUTS`` (8) outputs, or outputs depend on more than
  ``MAX_FUSION_INSTRUCTIONS`` (256) instructions;
- (decided by the layout walk, ``ops/fusion_walk.py``) the inputs' layouts need more than
  8 strided axes after merging the axes that are contiguous in every operand.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import NamedTuple

from ..configs.fusion import (
    MAX_FUSION_INPUTS,
    MAX_FUSION_INSTRUCTIONS,
    MAX_FUSION_OUTPUTS,
    ElementwiseFusionPlan,
    FusionInstruction,
)
from ..dtypes import DType
from ..errors import TenferroError, ValidationError
from .elementwise import CAST_KINDS, KINDS, Kind, check_convert, compare_kind, infer


class TypedOp(NamedTuple):
    """One instruction with its dtypes resolved."""

    vid: int  # the value it defines
    position: int  # its index in the plan
    kind: Kind
    primary: DType  # the functor's dtype
    args: tuple[int, ...]
    promote: tuple[bool, ...]  # per argument: a rank-0 real promoted to ``primary``
    dtype: DType  # of the result
    live: bool  # an output depends on it


class TypedPlan(NamedTuple):
    """A plan typed for one tuple of input dtypes and rank-0 flags."""

    dtypes: tuple[DType, ...]  # per value
    scalar: tuple[bool, ...]  # per value: rank 0
    live: tuple[bool, ...]  # per value: an output depends on it
    ops: tuple[TypedOp, ...]  # every instruction, in order
    outputs: tuple[int, ...]
    out_dtypes: tuple[DType, ...]
    reasons: tuple[str, ...]  # deferred-error reasons the live ops can raise
    declined: str  # "" or why the plan does not run as one kernel


def kind_of(ins: FusionInstruction) -> Kind:
    """The elementwise Kind an instruction applies."""
    if ins.op == "compare":
        assert ins.direction is not None
        return compare_kind(ins.direction)
    if ins.op in ("cast", "convert"):
        assert ins.to is not None
        return CAST_KINDS[ins.to]
    return KINDS[ins.op]


def _located(exc: TenferroError, plan: ElementwiseFusionPlan, i: int) -> TenferroError:
    """``exc`` with the instruction it concerns named first."""
    ins = plan.instructions[i]
    new = copy.copy(exc)
    new.args = (f"instruction {i} ({ins.describe()}, defining v{plan.num_inputs + i}): "
                f"{exc.args[0]}", *exc.args[1:])
    return new


def type_plan(plan: ElementwiseFusionPlan, dtypes: Sequence[DType], scalars: Sequence[bool],
              op: str) -> TypedPlan:
    """Resolve every value's dtype and rank-0 flag; raise on an invalid instruction."""
    vd, vs = list(dtypes), list(scalars)
    typed: list[TypedOp] = []
    for i, ins in enumerate(plan.instructions):
        kind = kind_of(ins)
        arg_d = [vd[a] for a in ins.args]
        try:
            inf = infer(kind, arg_d, [() if vs[a] else (1,) for a in ins.args], op)
            if ins.op == "convert":
                assert ins.to is not None
                check_convert(arg_d[0], ins.to, op)
        except TenferroError as exc:
            raise _located(exc, plan, i) from None
        vd.append(inf.dtype)
        vs.append(inf.shape == ())
        typed.append(TypedOp(plan.num_inputs + i, i, kind, inf.primary, ins.args, inf.promote,
                             inf.dtype, False))
    live = [False] * len(vd)
    for o in plan.outputs:
        live[o] = True
    for t in reversed(typed):
        if live[t.vid]:
            for a in t.args:
                live[a] = True
    ops = tuple(t._replace(live=live[t.vid]) for t in typed)
    reasons = tuple(sorted({r for t in ops if t.live
                            for r in (t.kind.error_reason(t.primary),) if r}))
    return TypedPlan(tuple(vd), tuple(vs), tuple(live), ops, plan.outputs,
                     tuple(vd[o] for o in plan.outputs), reasons,
                     _declined(plan, vs, live))


def _declined(plan: ElementwiseFusionPlan, scalar: list[bool], live: list[bool]) -> str:
    n = plan.num_inputs
    inputs = sum(live[:n])
    if inputs > MAX_FUSION_INPUTS:
        return f"outputs depend on {inputs} inputs (at most {MAX_FUSION_INPUTS} fuse)"
    if len(plan.outputs) > MAX_FUSION_OUTPUTS:
        return f"{len(plan.outputs)} outputs (at most {MAX_FUSION_OUTPUTS} fuse)"
    count = sum(live[n:])
    if count > MAX_FUSION_INSTRUCTIONS:
        return f"outputs depend on {count} instructions (at most {MAX_FUSION_INSTRUCTIONS})"
    ranks = {scalar[o] for o in plan.outputs}
    if len(ranks) > 1:
        zero = next(o for o in plan.outputs if scalar[o])
        other = next(o for o in plan.outputs if not scalar[o])
        return f"outputs of different shapes (v{zero} is rank 0, v{other} is not)"
    return ""


def output_shape(plan: ElementwiseFusionPlan, typed: TypedPlan,
                 shapes: Sequence[tuple[int, ...]], op: str) -> tuple[int, ...] | None:
    """The one shape of the outputs (None: they differ); raise on an instruction whose
    operands have different shapes that are not rank 0."""
    vshape: list[tuple[int, ...]] = [tuple(s) for s in shapes]
    for t in typed.ops:
        shape: tuple[int, ...] = ()
        for a in t.args:
            s = vshape[a]
            if not s:
                continue
            if not shape:
                shape = s
            elif s != shape:
                shown = " vs ".join(str(vshape[b]) for b in t.args)
                exc = ValidationError(f"shape mismatch: {shown} (operands must have one shape, "
                                      "or rank 0 to broadcast)", op=op, kind="shape_mismatch")
                raise _located(exc, plan, t.position)
        vshape.append(shape)
    outs = [vshape[o] for o in plan.outputs]
    return outs[0] if all(s == outs[0] for s in outs) else None
