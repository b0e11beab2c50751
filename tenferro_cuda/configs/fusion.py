"""``ElementwiseFusionPlan`` and its instruction record ``FusionInstruction``.

A plan is an SSA list over ``num_inputs`` tensors: values ``0 .. num_inputs - 1`` are the
inputs, instruction ``i`` defines value ``num_inputs + i`` by applying one elementwise,
analytic, ``cast`` or ``convert`` operation to earlier values, and ``outputs`` selects the
values returned (in order; a value may be listed twice, an input may be an output).

    plan = ElementwiseFusionPlan(2, [
        FusionInstruction("exp", (0,)),          # v2 = exp(v0)
        FusionInstruction("mul", (2, 1)),        # v3 = v2 * v1
        FusionInstruction("add", (3, 0)),        # v4 = v3 + v0
    ], outputs=(4,))

Both records are frozen and validated on construction: an unknown operation, a wrong
number of arguments, an argument that names no value (undefined) or a later value
(forward reference), a ``compare`` without a direction or a ``cast`` without a target
raise ``ValidationError``. Dtype rules are checked when the plan meets its inputs
(``shapes/fusion.py``). A plan hashes in O(1): its ``key`` (plain strings and ints) and
its hash are computed once; ``digest`` is stable across processes.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dtypes import DType, as_dtype
from ..errors import UnsupportedDTypeError, ValidationError
from .elementwise import ELEMENTWISE_OP_ARITY, CompareDir, ElementwiseReadOp

__all__ = ["FusionInstruction", "ElementwiseFusionPlan", "FUSION_OP_ARITY",
           "MAX_FUSION_INPUTS", "MAX_FUSION_OUTPUTS", "MAX_FUSION_INSTRUCTIONS"]

_OP = "ElementwiseFusionPlan"
# Every operation an instruction can apply, with its number of arguments.
FUSION_OP_ARITY: dict[str, int] = {**ELEMENTWISE_OP_ARITY, "cast": 1, "convert": 1}
# Plans beyond these sizes are valid but declined (execute_elementwise_fusion -> None).
MAX_FUSION_INPUTS = 16
MAX_FUSION_OUTPUTS = 8
MAX_FUSION_INSTRUCTIONS = 256


def _index(value: object, what: str) -> int:
    if isinstance(value, bool):
        raise ValidationError(f"{what} must be an int value id (got {value!r})", op=_OP)
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValidationError(f"{what} must be an int value id (got {value!r})",
                              op=_OP) from None


def _direction(value: object) -> CompareDir:
    if isinstance(value, str):
        try:
            return CompareDir[value.upper()]
        except KeyError:
            pass
    if not isinstance(value, CompareDir):
        raise ValidationError(f"compare needs a CompareDir direction (got {value!r})", op=_OP)
    return value


@dataclass(frozen=True)
class FusionInstruction:
    """One SSA instruction: ``op`` applied to the values ``args``.

    Parameters
    ----------
    op : str or ElementwiseReadOp
        ``add sub mul div rem pow maximum minimum compare neg conj abs sign exp log sin cos
        tanh sqrt rsqrt expm1 log1p select clamp cast convert``, the StableHLO additions
        ``floor ceil round_nearest_even round_nearest_afz is_finite logistic tan atan2
        cbrt real imag complex bitwise_and bitwise_or bitwise_xor bitwise_not shift_left
        shift_right_logical shift_right_arithmetic popcnt count_leading_zeros`` (every
        name of ``FUSION_OP_ARITY``), or the ElementwiseReadOp of one of the
        elementwise/analytic operations.
    args : sequence of int
        Value ids, as many as the operation takes (``select(pred, on_true, on_false)``,
        ``clamp(x, lower, upper)``).
    direction : CompareDir or str, optional
        The direction of a ``compare`` (required there, rejected elsewhere).
    to : DType or dtype name, optional
        The target of a ``cast`` or ``convert`` (required there, rejected elsewhere).
    """

    op: str
    args: tuple[int, ...]
    direction: CompareDir | None = None
    to: DType | None = None

    def __post_init__(self) -> None:
        op: Any = self.op  # a name or an ElementwiseReadOp until normalised here
        direction = self.direction
        if isinstance(op, ElementwiseReadOp):
            # a direction given as well must name op's own (as a CompareDir or a name)
            if direction is not None and (op.direction is None
                                          or _direction(direction) is not op.direction):
                raise ValidationError(f"direction {direction!r} conflicts with {op!r}", op=_OP)
            op, direction = op.name, op.direction
        if not isinstance(op, str) or op not in FUSION_OP_ARITY:
            raise ValidationError(f"unknown fusion instruction {op!r}; expected one of "
                                  f"{', '.join(FUSION_OP_ARITY)}", op=_OP)
        if isinstance(self.args, (str, bytes)) or not isinstance(self.args, Sequence):
            raise ValidationError(f"{op}: args must be a sequence of value ids "
                                  f"(got {self.args!r})", op=_OP)
        args = tuple(_index(a, f"{op}: argument") for a in self.args)
        if len(args) != FUSION_OP_ARITY[op]:
            raise ValidationError(f"{op} takes {FUSION_OP_ARITY[op]} argument(s) (got "
                                  f"{len(args)}: {args})", op=_OP)
        if any(a < 0 for a in args):
            raise ValidationError(f"{op}: value ids must be >= 0 (got {args})", op=_OP)
        if op == "compare":
            direction = _direction(direction)
        elif direction is not None:
            raise ValidationError(f"{op} takes no direction (got {direction!r})", op=_OP)
        to = self.to
        if op in ("cast", "convert"):
            if to is None:
                raise ValidationError(f"{op} needs a target dtype `to`", op=_OP)
            try:
                to = as_dtype(to)
            except UnsupportedDTypeError as exc:
                raise UnsupportedDTypeError(str(exc), op=_OP) from None
        elif to is not None:
            raise ValidationError(f"{op} takes no target dtype (got {to!r})", op=_OP)
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "direction", direction)
        object.__setattr__(self, "to", to)

    @property
    def key(self) -> tuple:
        """Plain (op, args, direction, target) tuple: stable, cheap to hash."""
        return (self.op, self.args, self.direction.value if self.direction else None,
                self.to.value if self.to else None)

    def describe(self) -> str:
        """Short text for messages, e.g. ``compare[LT](v2, v0)`` or ``cast[float16](v3)``."""
        extra = (f"[{self.direction.name}]" if self.direction else
                 f"[{self.to.value}]" if self.to else "")
        return f"{self.op}{extra}({', '.join(f'v{a}' for a in self.args)})"


@dataclass(frozen=True, eq=False)
class ElementwiseFusionPlan:
    """An SSA list of elementwise operations over ``num_inputs`` input tensors.

    Parameters
    ----------
    num_inputs : int
        Number of input tensors (values ``0 .. num_inputs - 1``).
    instructions : sequence of FusionInstruction
        Instruction ``i`` defines value ``num_inputs + i`` from earlier values.
    outputs : sequence of int
        The value ids returned, at least one.
    """

    num_inputs: int
    instructions: tuple[FusionInstruction, ...]
    outputs: tuple[int, ...]
    key: tuple = field(init=False, repr=False)
    digest: str = field(init=False, repr=False)
    _hash: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = _index(self.num_inputs, "num_inputs")
        if n < 0:
            raise ValidationError(f"num_inputs must be >= 0 (got {n})", op=_OP)
        if isinstance(self.instructions, (str, bytes)) or \
                not isinstance(self.instructions, Sequence):
            raise ValidationError(f"instructions must be a sequence of FusionInstruction "
                                  f"(got {self.instructions!r})", op=_OP)
        instrs = tuple(self.instructions)
        for i, ins in enumerate(instrs):
            if not isinstance(ins, FusionInstruction):
                raise ValidationError(f"instruction {i} must be a FusionInstruction (got "
                                      f"{ins!r})", op=_OP)
            _check_refs(ins.args, n + i, n + len(instrs), f"instruction {i} "
                        f"({ins.describe()}) defining v{n + i}")
        outputs = self._outputs(n + len(instrs))
        object.__setattr__(self, "num_inputs", n)
        object.__setattr__(self, "instructions", instrs)
        object.__setattr__(self, "outputs", outputs)
        key = (n, tuple(ins.key for ins in instrs), outputs)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "digest", hashlib.sha256(repr(key).encode()).hexdigest()[:16])
        object.__setattr__(self, "_hash", hash(key))

    def _outputs(self, total: int) -> tuple[int, ...]:
        if isinstance(self.outputs, (str, bytes)) or not isinstance(self.outputs, Sequence):
            raise ValidationError(f"outputs must be a sequence of value ids (got "
                                  f"{self.outputs!r})", op=_OP)
        outputs = tuple(_index(o, "output") for o in self.outputs)
        if not outputs:
            raise ValidationError("a plan needs at least one output", op=_OP)
        for o in outputs:
            if not 0 <= o < total:
                raise ValidationError(f"output v{o} is undefined: the plan defines values "
                                      f"v0 .. v{total - 1}", op=_OP)
        return outputs

    @property
    def num_values(self) -> int:
        """Inputs plus instructions."""
        return self.num_inputs + len(self.instructions)

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self):
        # Rebuild (never copy ``_hash``: str hashes differ between processes).
        return (ElementwiseFusionPlan, (self.num_inputs, self.instructions, self.outputs))

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if type(other) is not ElementwiseFusionPlan:
            return NotImplemented
        return self._hash == other._hash and self.key == other.key

    def __repr__(self) -> str:
        body = "; ".join(f"v{self.num_inputs + i} = {ins.describe()}"
                         for i, ins in enumerate(self.instructions))
        outs = ", ".join(f"v{o}" for o in self.outputs)
        return f"ElementwiseFusionPlan(inputs {self.num_inputs}: {body} -> {outs})"


def _check_refs(args: tuple[int, ...], defined: int, total: int, where: str) -> None:
    for a in args:
        if a >= total:
            raise ValidationError(f"{where}: v{a} is undefined (the plan defines v0 .. "
                                  f"v{total - 1})", op=_OP)
        if a >= defined:
            raise ValidationError(f"{where}: v{a} is a forward reference (only v0 .. "
                                  f"v{defined - 1} are defined before it)", op=_OP)
