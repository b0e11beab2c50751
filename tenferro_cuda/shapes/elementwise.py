"""Dtype and shape rules of the elementwise, analytic and cast operations (pure Python).

Each operation is a ``Kind``: its arity, the dtypes it accepts, its result dtype and the
op functor of ``ptx/include/tenferro/ops.cuh`` that computes it. ``infer`` validates a
call and returns the result's shape and dtype; it raises before anything is allocated:

- wrong number of inputs -> ``ValidationError`` (invalid_argument);
- operands of different dtypes -> ``ValidationError`` (dtype_mismatch), except a real
  rank-0 operand next to its complex counterpart in add/sub/mul/div/pow (``float32``
  rank-0 with ``complex64``), which is promoted;
- a dtype the operation does not define (bool arithmetic, complex ordering, analytic
  functions of integers, a non-bool select predicate) -> ``UnsupportedDTypeError``;
- operand shapes that are neither equal nor rank 0 -> ``ValidationError`` (shape_mismatch);
- scalar operands (binary and ternary ops; a None dtype and shape ``()`` here) take the
  dtype of their slot -- the tensor operands' dtype, bool for the select predicate -- so at
  least one operand, and one of ``select``'s branches, must be a tensor
  (``ValidationError``, invalid_argument); whether the value fits is
  ``shapes/scalars.py``'s rule.

The table here is also the kernel registry's list of instantiations
(``kernels/families/elementwise.py``), so what validates is exactly what is compiled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..configs.elementwise import ELEMENTWISE_OP_ARITY, CompareDir, ElementwiseReadOp
from ..dtypes import ALL_DTYPES, DType, as_dtype, lattice_allows
from ..errors import UnsupportedDTypeConversionError, UnsupportedDTypeError, ValidationError
from . import check_out

ALL = frozenset(ALL_DTYPES)
NUMERIC = frozenset(d for d in ALL_DTYPES if d.is_numeric)
REAL = frozenset(d for d in ALL_DTYPES if d.is_integer or d.is_float)
ORDERED = REAL | {DType.BOOL}
INEXACT = frozenset(d for d in ALL_DTYPES if d.is_inexact)
INTEGERS = frozenset(d for d in ALL_DTYPES if d.is_integer)
FLOATS = frozenset(d for d in ALL_DTYPES if d.is_float)
LOGICAL = INTEGERS | {DType.BOOL}
COMPLEX_PARTS = frozenset(d.real for d in ALL_DTYPES if d.is_complex)  # complex(re, im)
ROLES = {1: ("x",), 2: ("lhs", "rhs"), 3: ("first", "second", "third")}
ROLES_OF = {"select": ("pred", "on_true", "on_false"), "clamp": ("x", "lower", "upper")}


@dataclass(frozen=True)
class Kind:
    """One elementwise operation as the engine runs it."""

    key: str  # unique per operation (compare per direction, cast per target)
    name: str  # the operation's name in messages
    arity: int
    accepts: frozenset[DType]  # primary dtypes
    result: str  # "same", "bool", "real", "complex" or "cast"
    functor: str  # C++ op functor, e.g. "tf::CmpOp<2>"
    family: str = "elementwise"
    promote: bool = False  # real rank-0 operand with its complex counterpart
    direction: CompareDir | None = None
    to: DType | None = None  # cast target

    def out_dtype(self, primary: DType) -> DType:
        if self.result == "same":
            return primary
        if self.result == "bool":
            return DType.BOOL
        if self.result == "real":
            return primary.real
        if self.result == "complex":
            return primary.complex
        assert self.to is not None
        return self.to

    def instantiable(self, dtype: DType) -> bool:
        """Whether ``dtype`` is a valid primary dtype (what the registry compiles)."""
        if dtype not in self.accepts:
            return False
        return not (dtype.is_complex and self.direction not in (None, CompareDir.EQ,
                                                                 CompareDir.NE))

    def error_reason(self, dtype: DType) -> str | None:
        """The deferred device error this kind can raise for ``dtype`` (None: cannot)."""
        if self.name in ("div", "rem") and dtype.is_integer:
            return "integer division by zero"
        if self.name == "pow" and dtype.is_signed_integer:
            return "negative integer exponent"
        return None

    @property
    def roles(self) -> tuple[str, ...]:
        return ROLES_OF.get(self.name, ROLES[self.arity])


def _k(name: str, accepts: frozenset[DType], functor: str, result: str = "same",
       promote: bool = False) -> Kind:
    return Kind(name, name, ELEMENTWISE_OP_ARITY[name], accepts, result, functor,
                promote=promote)


KINDS: dict[str, Kind] = {k.key: k for k in (
    _k("add", NUMERIC, "tf::AddOp", promote=True),
    _k("sub", NUMERIC, "tf::SubOp", promote=True),
    _k("mul", NUMERIC, "tf::MulOp", promote=True),
    _k("div", NUMERIC, "tf::DivOp", promote=True),
    _k("pow", NUMERIC, "tf::PowOp", promote=True),
    _k("rem", REAL, "tf::RemOp"),
    _k("maximum", ORDERED, "tf::MaxOp"),
    _k("minimum", ORDERED, "tf::MinOp"),
    _k("neg", NUMERIC, "tf::NegOp"),
    _k("conj", ALL, "tf::ConjOp"),
    _k("abs", NUMERIC, "tf::AbsOp", result="real"),
    _k("sign", NUMERIC, "tf::SignOp"),
    _k("exp", INEXACT, "tf::ExpOp"),
    _k("log", INEXACT, "tf::LogOp"),
    _k("sin", INEXACT, "tf::SinOp"),
    _k("cos", INEXACT, "tf::CosOp"),
    _k("tanh", INEXACT, "tf::TanhOp"),
    _k("sqrt", INEXACT, "tf::SqrtOp"),
    _k("rsqrt", INEXACT, "tf::RsqrtOp"),
    _k("expm1", INEXACT, "tf::Expm1Op"),
    _k("log1p", INEXACT, "tf::Log1pOp"),
    _k("select", ALL, "tf::SelectOp"),
    _k("clamp", ORDERED, "tf::ClampOp"),
    _k("floor", FLOATS, "tf::FloorOp"),
    _k("ceil", FLOATS, "tf::CeilOp"),
    _k("round_nearest_even", FLOATS, "tf::RoundEvenOp"),
    _k("round_nearest_afz", FLOATS, "tf::RoundAfzOp"),
    _k("is_finite", FLOATS, "tf::IsFiniteOp", result="bool"),
    _k("real", INEXACT, "tf::RealOp", result="real"),
    _k("imag", INEXACT, "tf::ImagOp", result="real"),
    _k("complex", COMPLEX_PARTS, "tf::ComplexOp", result="complex"),
    _k("bitwise_and", LOGICAL, "tf::AndOp"),
    _k("bitwise_or", LOGICAL, "tf::OrOp"),
    _k("bitwise_xor", LOGICAL, "tf::XorOp"),
    _k("bitwise_not", LOGICAL, "tf::NotOp"),
    _k("shift_left", INTEGERS, "tf::ShiftLeftOp"),
    _k("shift_right_logical", INTEGERS, "tf::ShiftRightLogicalOp"),
    _k("shift_right_arithmetic", INTEGERS, "tf::ShiftRightArithmeticOp"),
    _k("popcnt", INTEGERS, "tf::PopcntOp"),
    _k("count_leading_zeros", INTEGERS, "tf::ClzOp"),
    _k("logistic", INEXACT, "tf::LogisticOp"),
    _k("tan", INEXACT, "tf::TanOp"),
    _k("atan2", INEXACT, "tf::Atan2Op"),
    _k("cbrt", INEXACT, "tf::CbrtOp"),
    *(Kind(f"compare_{d.value}", "compare", 2, ALL, "bool", f"tf::CmpOp<{d.kernel_code}>",
           direction=d) for d in CompareDir),
)}
CAST_KINDS: dict[DType, Kind] = {
    to: Kind(f"cast_{to.value}", "cast", 1, ALL, "cast", f"tf::CastOp<{to.ctype}>",
             family="cast", to=to) for to in ALL_DTYPES}


def compare_kind(direction: CompareDir | str, op: str = "compare") -> Kind:
    """The kind of ``compare`` in ``direction`` (a CompareDir or its name, e.g. "LT");
    ``op`` names the method in the error."""
    if isinstance(direction, str):
        try:
            direction = CompareDir[direction.upper()]
        except KeyError:
            pass
    if not isinstance(direction, CompareDir):
        raise ValidationError(f"compare direction must be a CompareDir (got {direction!r})",
                              op=op)
    return KINDS[f"compare_{direction.value}"]


def kind_of(record: ElementwiseReadOp, op: str) -> Kind:
    """The kind named by an ``ElementwiseReadOp``."""
    if not isinstance(record, ElementwiseReadOp):
        raise ValidationError(f"op must be an ElementwiseReadOp (got {record!r})", op=op)
    if record.direction is not None:
        return compare_kind(record.direction, op)
    return KINDS[record.name]


class Inferred(NamedTuple):
    shape: tuple[int, ...]
    dtype: DType  # of the result
    primary: DType  # the kernel's primary dtype
    promote: tuple[bool, ...]  # per input: a real rank-0 operand to promote to complex


def _primary(kind: Kind, dtypes: Sequence[DType | None], shapes: Sequence[Sequence[int]],
             op: str) -> tuple[DType, tuple[bool, ...]]:
    none = (False,) * len(dtypes)
    if kind.name == "select":
        if dtypes[0] is not None and dtypes[0] is not DType.BOOL:
            raise UnsupportedDTypeError(f"the select predicate must be bool (got "
                                        f"{dtypes[0].value})", op=op)
        on_true, on_false = dtypes[1], dtypes[2]
        if on_true is None or on_false is None:
            if on_true is on_false:
                raise ValidationError("on_true and on_false are both scalars: one of them "
                                      "must be a tensor, whose dtype the other takes", op=op)
            return on_true or on_false, none  # type: ignore[return-value]
        if on_true is not on_false:
            raise ValidationError(f"dtype mismatch: on_true is {on_true.value}, on_false "
                                  f"is {on_false.value}", op=op, kind="dtype_mismatch")
        return on_true, none
    tensors = [(d, s) for d, s in zip(dtypes, shapes) if d is not None]
    if not tensors:
        raise ValidationError(f"every operand of {kind.name} is a scalar: at least one must "
                              "be a tensor (it fixes the result's shape and dtype)", op=op)
    first = tensors[0][0]
    if all(d is first for d, _ in tensors):
        return first, none
    complexes = {d for d, _ in tensors if d.is_complex}
    if kind.promote and len(complexes) == 1 and len(tensors) == len(dtypes):
        target = complexes.pop()
        promote = tuple(d is not target for d in dtypes)
        if all(d is target.real and len(s) == 0
               for d, s, p in zip(dtypes, shapes, promote) if p):
            return target, promote
    names = ", ".join(d.value for d, _ in tensors)
    hint = (" (a real operand mixes with its complex counterpart only as a rank-0 scalar)"
            if kind.promote else "")
    raise ValidationError(f"dtype mismatch: {names}; no implicit promotion, use convert or "
                          f"cast{hint}", op=op, kind="dtype_mismatch")


def infer(kind: Kind, dtypes: Sequence[DType | None], shapes: Sequence[Sequence[int]],
          op: str) -> Inferred:
    """Validate operand dtypes and shapes for ``kind``; the result's shape and dtype. A
    None dtype is a scalar operand (shape ``()``): it takes its slot's dtype."""
    if len(dtypes) != kind.arity:
        raise ValidationError(f"{kind.name} takes {kind.arity} input(s) (got {len(dtypes)})",
                              op=op)
    primary, promote = _primary(kind, dtypes, shapes, op)
    if not kind.instantiable(primary):
        what = ("complex numbers are not ordered: compare takes EQ or NE"
                if primary in kind.accepts else _accepts_text(kind))
        raise UnsupportedDTypeError(f"{kind.name} is not defined for {primary.value} ({what})",
                                    op=op)
    shape: tuple[int, ...] = ()
    for s in shapes:
        if len(s) == 0:
            continue
        if not shape:
            shape = tuple(s)
        elif tuple(s) != shape:
            shown = " vs ".join(str(tuple(x)) for x in shapes)
            raise ValidationError(f"shape mismatch: {shown} (operands must have one shape, "
                                  "or rank 0 to broadcast)", op=op, kind="shape_mismatch")
    return Inferred(shape, kind.out_dtype(primary), primary, promote)


def _accepts_text(kind: Kind) -> str:
    return "accepts " + ", ".join(d.value for d in ALL_DTYPES if d in kind.accepts)


def check_out_view(out_shape: Sequence[int], out_strides: Sequence[int], out_dtype: DType,
                   shape: Sequence[int], dtype: DType, op: str) -> None:
    """A caller-owned output: exactly the result's shape and dtype, no repeated elements."""
    check_out(out_shape, out_dtype, shape, dtype, op)
    for axis, (n, st) in enumerate(zip(out_shape, out_strides)):
        if n > 1 and st == 0:
            raise ValidationError(f"out has stride 0 on axis {axis} (extent {n}): its "
                                  "elements would be written more than once", op=op)


def cast_target(to: object, op: str) -> DType:
    """Normalise a cast/convert target (DType, name or numpy dtype)."""
    try:
        return as_dtype(to)
    except UnsupportedDTypeError as exc:
        raise UnsupportedDTypeError(str(exc), op=op) from None


def check_convert(src: DType, dst: DType, op: str = "convert") -> None:
    """``convert`` follows the value-preserving lattice; anything else must be a cast."""
    if not lattice_allows(src, dst):
        allowed = ", ".join(d.value for d in ALL_DTYPES if lattice_allows(src, d))
        raise UnsupportedDTypeConversionError(
            f"convert {src.value} -> {dst.value} is not value preserving (the lattice allows "
            f"{src.value} -> {allowed}); use cast for a projection", op=op)


def integer_kinds() -> list[Kind]:
    """Kinds that can raise a deferred device error for some integer dtype."""
    return [k for k in KINDS.values()
            if any(k.error_reason(d) for d in INTEGERS if k.instantiable(d))]
