"""Elementwise functions: add sub mul neg conj div rem abs sign maximum minimum compare
select clamp; floor ceil round_nearest_even round_nearest_afz is_finite; real imag complex;
bitwise_and bitwise_or bitwise_xor bitwise_not shift_left shift_right_logical
shift_right_arithmetic popcnt count_leading_zeros -- each in four forms -- plus
``elementwise_read_into``. Names are StableHLO's, except that its ``and or xor not`` (Python
keywords, three of them) are the ``bitwise_*`` methods, as in jax.lax; on bool they are the
logical operations.

Forms (DESIGN 4): ``op(...)`` and ``op_read(...)`` return a new compact tensor and accept
tensors or strided views; ``op_into(..., out)`` and ``op_read_into(..., out)`` overwrite
a caller-owned tensor or view of exactly the result's shape and dtype, which must not
overlap an input -- except that it may be exactly the same view as an input of the
result's dtype (in place: each element is read before it is written). Operands share one
dtype and one shape; a rank-0 operand broadcasts; a real rank-0 operand may meet its
complex counterpart in add/sub/mul/div (and pow). An operand of a binary or ternary op
may be a scalar (a Python or numpy bool, int, float or complex; ``shapes/scalars.py``):
passed to the kernel by value (no upload, no allocation), it takes the dtype of its slot
and must fit it; at least one operand (and one branch of a select) is a tensor.
Semantics and the dtypes each op accepts: ``docs/dtypes.md`` and ``shapes/elementwise.py``;
the device definitions: ``ptx/include/tenferro/ops.cuh``. Every op only enqueues; integer
division by zero is a deferred error raised by ``synchronize()``.

``METHODS`` lists (method name, function) pairs for the session facade.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...configs.elementwise import CompareDir, ElementwiseReadOp
from ...errors import ValidationError
from ...exec.context import ExecContext
from ...shapes.elementwise import KINDS, compare_kind, kind_of
from ...shapes.scalars import Scalar
from ...tensor import Tensor, TensorView, _Strided
from . import engine
from .cast import METHODS as CAST_METHODS
from .methods import SUFFIX, docstring, impl_for, make_function

__all__ = ["METHODS", "elementwise_read_into"]

SUMMARY = {
    "add": "Elementwise ``lhs + rhs`` (integers wrap).",
    "sub": "Elementwise ``lhs - rhs`` (integers wrap).",
    "mul": "Elementwise ``lhs * rhs`` (integers wrap).",
    "div": "Elementwise ``lhs / rhs``; integers truncate toward zero, ``INT_MIN / -1`` wraps "
           "to ``INT_MIN``, division by zero is a deferred error (result 0).",
    "rem": "Elementwise remainder with the sign of ``lhs`` (C ``fmod``); integer remainder "
           "by zero is a deferred error, ``INT_MIN % -1`` is 0.",
    "maximum": "Elementwise maximum; NaN propagates; on bool it is logical or.",
    "minimum": "Elementwise minimum; NaN propagates; on bool it is logical and.",
    "neg": "Elementwise ``-x`` (integers wrap: ``-INT_MIN == INT_MIN``).",
    "conj": "Elementwise complex conjugate (the identity on real dtypes and bool).",
    "abs": "Elementwise ``|x|``; complex input gives the real dtype; ``abs(INT_MIN)`` wraps.",
    "sign": "Elementwise sign: -1, 0 or 1 (NaN stays NaN, -0.0 stays -0.0 as in "
            "``jax.lax.sign``; numpy gives +0.0); complex ``z/|z|`` (0 gives 0).",
    "select": "Elementwise ``on_true if pred else on_false`` with a bool ``pred``.",
    "clamp": "Elementwise ``minimum(maximum(x, lower), upper)`` (NaN propagates).",
    "floor": "Elementwise round toward -inf (real floats; exact, -0.0/inf/NaN kept).",
    "ceil": "Elementwise round toward +inf (real floats; exact, ``ceil(-0.5) == -0.0``).",
    "round_nearest_even": "Elementwise round to the nearest integral value, ties to even "
                          "(real floats).",
    "round_nearest_afz": "Elementwise round to the nearest integral value, ties away from "
                         "zero (real floats).",
    "is_finite": "Elementwise ``x`` is neither +-inf nor NaN, as bool (real floats).",
    "real": "Elementwise real part, in the real dtype (the identity on real floats).",
    "imag": "Elementwise imaginary part, in the real dtype (+0.0 for real floats).",
    "complex": "Elementwise ``lhs + i * rhs`` from float32 or float64 parts (complex64 or "
               "complex128).",
    "bitwise_and": "Elementwise AND: logical on bool, bitwise on integers (StableHLO "
                   "``and``).",
    "bitwise_or": "Elementwise OR: logical on bool, bitwise on integers (StableHLO ``or``).",
    "bitwise_xor": "Elementwise XOR: logical on bool, bitwise on integers (StableHLO "
                   "``xor``).",
    "bitwise_not": "Elementwise NOT: logical on bool, bitwise on integers (StableHLO "
                   "``not``).",
    "shift_left": "Elementwise ``lhs << rhs`` (integers); a shift of the bit width or more "
                  "(``rhs`` read as unsigned) gives 0.",
    "shift_right_logical": "Elementwise logical ``lhs >> rhs`` (integers, zero fill); a shift "
                           "of the bit width or more (``rhs`` read as unsigned) gives 0.",
    "shift_right_arithmetic": "Elementwise arithmetic ``lhs >> rhs`` (integers, the top bit "
                              "fills); a shift of the bit width or more (``rhs`` read as "
                              "unsigned) gives 0 or -1 (all ones) by the top bit.",
    "popcnt": "Elementwise number of set bits (integers; result in the input dtype).",
    "count_leading_zeros": "Elementwise number of leading zero bits (integers; the bit width "
                           "for 0).",
}
FORMS = tuple(SUFFIX)


def _compare(form: str) -> tuple[str, Callable]:
    name = "compare" + SUFFIX[form]
    into = form in ("into", "read_into")
    impls = {d: impl_for(KINDS[f"compare_{d.value}"], name, into) for d in CompareDir}

    def resolve(direction: object) -> Callable:
        impl = impls.get(direction) if isinstance(direction, CompareDir) else None
        if impl is not None:
            return impl
        kind = compare_kind(direction, name)  # type: ignore[arg-type]
        return impls[kind.direction]  # type: ignore[index]

    summary = ("Elementwise comparison ``lhs <direction> rhs`` giving bool; complex operands "
               "take EQ and NE only.")
    extra = "direction : CompareDir\n    EQ, NE, LT, LE, GT or GE (or its name)."
    doc = docstring(summary, 2, form, extra=extra)
    if into:
        def compare_write(ctx: ExecContext, lhs: Tensor | TensorView | Scalar,
                          rhs: Tensor | TensorView | Scalar, direction: CompareDir | str,
                          out: Tensor | TensorView) -> None:
            resolve(direction)(ctx, lhs, rhs, out)
        fn: Callable = compare_write
    else:
        def compare(ctx: ExecContext, lhs: Tensor | TensorView | Scalar,
                    rhs: Tensor | TensorView | Scalar, direction: CompareDir | str) -> Tensor:
            return resolve(direction)(ctx, lhs, rhs)
        fn = compare
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return name, fn


def elementwise_read_into(ctx: ExecContext, op: ElementwiseReadOp, inputs: Sequence,
                          out: Tensor | TensorView) -> None:
    """Overwrite ``out`` with the elementwise operation ``op`` of ``inputs``.

    Parameters
    ----------
    op : ElementwiseReadOp
        Any elementwise or analytic operation, e.g. ``ElementwiseReadOp.ADD`` or
        ``ElementwiseReadOp.compare(CompareDir.LT)``.
    inputs : sequence of Tensor, TensorView or scalar
        ``op.arity`` operands (same rules as the named ops): device tensors or views of
        this session, and for a binary or ternary ``op`` scalars (Python or numpy bool,
        int, float or complex), passed by value in the dtype of their slot.
    out : Tensor or TensorView
        Caller-owned output of exactly the result's shape and dtype; it must not
        overlap an input, except as exactly the same view (in place).

    Returns
    -------
    None
        The result is enqueued into ``out``.

    Raises
    ------
    ValidationError
        Unknown op, wrong number of inputs, dtype/shape mismatch, bad ``out``, a scalar
        that does not fit its dtype, no tensor operand.
    UnsupportedDTypeError
        ``op`` is not defined for the dtype.
    RuntimeStateError
        An operand is not resident on this session, or the session is closed.
    """
    name = "elementwise_read_into"
    kind = kind_of(op, name)
    if type(inputs) is not tuple and type(inputs) is not list and (
            isinstance(inputs, (_Strided, str, bytes)) or not isinstance(inputs, Sequence)):
        raise ValidationError(f"inputs must be a sequence of tensors, in operand order (a "
                              f"list or tuple; got {type(inputs).__name__})", op=name)
    engine.run(ctx, kind, name, tuple(inputs), out)


def _table() -> list[tuple[str, Callable]]:
    out = [make_function(KINDS[op], op, form, SUMMARY[op]) for op in SUMMARY for form in FORMS]
    out += [_compare(form) for form in FORMS]
    out.append(("elementwise_read_into", elementwise_read_into))
    return out + list(CAST_METHODS)


METHODS: tuple[tuple[str, Callable], ...] = tuple(_table())
