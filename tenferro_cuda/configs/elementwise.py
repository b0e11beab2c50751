"""Configuration records of the elementwise family: ``CompareDir`` and ``ElementwiseReadOp``.

``ElementwiseReadOp`` names one elementwise operation for
``session.elementwise_read_into(op, inputs, out)``: a constant per operation
(``ElementwiseReadOp.ADD``, ``ElementwiseReadOp.EXP``, ...) or
``ElementwiseReadOp.compare(CompareDir.LT)``. Names are StableHLO's op names, except
that ``and``, ``or`` and ``not`` are Python keywords: the four logical/bitwise ops are
``bitwise_and``, ``bitwise_or``, ``bitwise_xor`` and ``bitwise_not`` (jax.lax's names;
logical on bool). Records are frozen, hashable and validated on construction (an unknown
name, a compare without a direction, or a direction on anything else raises
``ValidationError``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from ..errors import ValidationError

__all__ = ["CompareDir", "ElementwiseReadOp", "ELEMENTWISE_OP_ARITY"]


class CompareDir(enum.Enum):
    """Direction of ``compare``: ``lhs <dir> rhs``."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"

    @property
    def kernel_code(self) -> int:
        """The ``tf::CMP_*`` value of ``ptx/include/tenferro/ops.cuh``."""
        return _CMP_CODE[self]


_CMP_CODE = {CompareDir.EQ: 0, CompareDir.NE: 1, CompareDir.LT: 2, CompareDir.LE: 3,
             CompareDir.GT: 4, CompareDir.GE: 5}

# Every operation ElementwiseReadOp can name, with its number of inputs.
ELEMENTWISE_OP_ARITY: dict[str, int] = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "rem": 2, "pow": 2, "maximum": 2, "minimum": 2,
    "compare": 2,
    "neg": 1, "conj": 1, "abs": 1, "sign": 1,
    "exp": 1, "log": 1, "sin": 1, "cos": 1, "tanh": 1, "sqrt": 1, "rsqrt": 1, "expm1": 1,
    "log1p": 1,
    "select": 3, "clamp": 3,
    "floor": 1, "ceil": 1, "round_nearest_even": 1, "round_nearest_afz": 1, "is_finite": 1,
    "real": 1, "imag": 1, "complex": 2,
    "bitwise_and": 2, "bitwise_or": 2, "bitwise_xor": 2, "bitwise_not": 1,
    "shift_left": 2, "shift_right_logical": 2, "shift_right_arithmetic": 2,
    "popcnt": 1, "count_leading_zeros": 1,
    "logistic": 1, "tan": 1, "atan2": 2, "cbrt": 1,
}


@dataclass(frozen=True)
class ElementwiseReadOp:
    """One elementwise operation: ``name`` plus the direction of a ``compare``."""

    name: str
    direction: CompareDir | None = None

    ADD: ClassVar[ElementwiseReadOp]
    SUB: ClassVar[ElementwiseReadOp]
    MUL: ClassVar[ElementwiseReadOp]
    DIV: ClassVar[ElementwiseReadOp]
    REM: ClassVar[ElementwiseReadOp]
    POW: ClassVar[ElementwiseReadOp]
    MAXIMUM: ClassVar[ElementwiseReadOp]
    MINIMUM: ClassVar[ElementwiseReadOp]
    NEG: ClassVar[ElementwiseReadOp]
    CONJ: ClassVar[ElementwiseReadOp]
    ABS: ClassVar[ElementwiseReadOp]
    SIGN: ClassVar[ElementwiseReadOp]
    EXP: ClassVar[ElementwiseReadOp]
    LOG: ClassVar[ElementwiseReadOp]
    SIN: ClassVar[ElementwiseReadOp]
    COS: ClassVar[ElementwiseReadOp]
    TANH: ClassVar[ElementwiseReadOp]
    SQRT: ClassVar[ElementwiseReadOp]
    RSQRT: ClassVar[ElementwiseReadOp]
    EXPM1: ClassVar[ElementwiseReadOp]
    LOG1P: ClassVar[ElementwiseReadOp]
    SELECT: ClassVar[ElementwiseReadOp]
    CLAMP: ClassVar[ElementwiseReadOp]
    FLOOR: ClassVar[ElementwiseReadOp]
    CEIL: ClassVar[ElementwiseReadOp]
    ROUND_NEAREST_EVEN: ClassVar[ElementwiseReadOp]
    ROUND_NEAREST_AFZ: ClassVar[ElementwiseReadOp]
    IS_FINITE: ClassVar[ElementwiseReadOp]
    REAL: ClassVar[ElementwiseReadOp]
    IMAG: ClassVar[ElementwiseReadOp]
    COMPLEX: ClassVar[ElementwiseReadOp]
    BITWISE_AND: ClassVar[ElementwiseReadOp]
    BITWISE_OR: ClassVar[ElementwiseReadOp]
    BITWISE_XOR: ClassVar[ElementwiseReadOp]
    BITWISE_NOT: ClassVar[ElementwiseReadOp]
    SHIFT_LEFT: ClassVar[ElementwiseReadOp]
    SHIFT_RIGHT_LOGICAL: ClassVar[ElementwiseReadOp]
    SHIFT_RIGHT_ARITHMETIC: ClassVar[ElementwiseReadOp]
    POPCNT: ClassVar[ElementwiseReadOp]
    COUNT_LEADING_ZEROS: ClassVar[ElementwiseReadOp]
    LOGISTIC: ClassVar[ElementwiseReadOp]
    TAN: ClassVar[ElementwiseReadOp]
    ATAN2: ClassVar[ElementwiseReadOp]
    CBRT: ClassVar[ElementwiseReadOp]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or self.name not in ELEMENTWISE_OP_ARITY:
            raise ValidationError(
                f"unknown elementwise op {self.name!r}; expected one of "
                f"{', '.join(ELEMENTWISE_OP_ARITY)}", op="ElementwiseReadOp")
        if self.name == "compare":
            if not isinstance(self.direction, CompareDir):
                raise ValidationError(
                    f"compare needs a CompareDir direction (got {self.direction!r})",
                    op="ElementwiseReadOp")
        elif self.direction is not None:
            raise ValidationError(f"{self.name} takes no direction (got {self.direction!r})",
                                  op="ElementwiseReadOp")

    @classmethod
    def compare(cls, direction: CompareDir) -> ElementwiseReadOp:
        """The record of ``compare(lhs, rhs, direction)``."""
        return cls("compare", direction)

    @property
    def arity(self) -> int:
        """Number of input tensors the operation takes."""
        return ELEMENTWISE_OP_ARITY[self.name]

    def __repr__(self) -> str:
        if self.direction is not None:
            return f"ElementwiseReadOp.compare(CompareDir.{self.direction.name})"
        return f"ElementwiseReadOp.{self.name.upper()}"


for _name in ELEMENTWISE_OP_ARITY:
    if _name != "compare":
        setattr(ElementwiseReadOp, _name.upper(), ElementwiseReadOp(_name))
del _name
