"""Elementwise session methods: add sub mul neg conj div rem abs sign maximum minimum
compare select clamp, each in four forms, plus ``elementwise_read_into``.

Forms (DESIGN §4): ``op(...)`` and ``op_read(...)`` return a new compact tensor and accept
tensors or strided views; ``op_into(..., out)`` and ``op_read_into(..., out)`` overwrite
a caller-owned tensor or view of exactly the result's shape and dtype, which must not
overlap an input. Operands share one dtype and one shape; a rank-0 operand broadcasts;
a real rank-0 operand may meet its complex counterpart in add/sub/mul/div (and pow).
Semantics and the dtypes each op accepts: ``docs/dtypes.md`` and
``shapes/elementwise.py``; the device definitions: ``ptx/include/tenferro/ops.cuh``.
Every op only enqueues; integer division by zero is a deferred error raised by
``synchronize()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..configs.elementwise import CompareDir, ElementwiseReadOp
from ..errors import ValidationError
from ..shapes.elementwise import KINDS, compare_kind, kind_of
from ..tensor import Tensor, _Strided
from .elementwise_engine import ElementwiseEngine
from .elementwise_methods import SUFFIX, binary_impl, docstring, make_method

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
    "sign": "Elementwise sign: -1, 0 or 1 (NaN stays NaN, -0.0 gives 0); complex ``z/|z|`` "
            "(0 gives 0).",
    "select": "Elementwise ``on_true if pred else on_false`` with a bool ``pred``.",
    "clamp": "Elementwise ``minimum(maximum(x, lower), upper)`` (NaN propagates).",
}
FORMS = tuple(SUFFIX)


def _m(op: str, form: str):
    return make_method(KINDS[op], op, form, SUMMARY[op])


def _compare(form: str):
    name = "compare" + SUFFIX[form]
    into = form in ("into", "read_into")
    impls = {d: binary_impl(KINDS[f"compare_{d.value}"], name, into) for d in CompareDir}

    def resolve(direction):
        impl = impls.get(direction) if isinstance(direction, CompareDir) else None
        return impl if impl is not None else impls[compare_kind(direction).direction]

    summary = ("Elementwise comparison ``lhs <direction> rhs`` giving bool; complex operands "
               "take EQ and NE only.")
    extra = "direction : CompareDir\n    EQ, NE, LT, LE, GT or GE (or its name)."
    doc = docstring(summary, 2, form, extra=extra)
    if into:
        def compare_write(self, lhs, rhs, direction: CompareDir, out) -> None:
            resolve(direction)(self, lhs, rhs, out)
        compare_write.__name__ = compare_write.__qualname__ = name
        compare_write.__doc__ = doc
        return compare_write

    def compare_owned(self, lhs, rhs, direction: CompareDir) -> Tensor:
        return resolve(direction)(self, lhs, rhs)
    compare_owned.__name__ = compare_owned.__qualname__ = name
    compare_owned.__doc__ = doc
    return compare_owned


class ElementwiseOps(ElementwiseEngine):
    """The elementwise methods of the session (see the module docstring)."""

    add, add_read, add_into, add_read_into = (_m("add", f) for f in FORMS)
    sub, sub_read, sub_into, sub_read_into = (_m("sub", f) for f in FORMS)
    mul, mul_read, mul_into, mul_read_into = (_m("mul", f) for f in FORMS)
    div, div_read, div_into, div_read_into = (_m("div", f) for f in FORMS)
    rem, rem_read, rem_into, rem_read_into = (_m("rem", f) for f in FORMS)
    maximum, maximum_read, maximum_into, maximum_read_into = (_m("maximum", f) for f in FORMS)
    minimum, minimum_read, minimum_into, minimum_read_into = (_m("minimum", f) for f in FORMS)
    neg, neg_read, neg_into, neg_read_into = (_m("neg", f) for f in FORMS)
    conj, conj_read, conj_into, conj_read_into = (_m("conj", f) for f in FORMS)
    abs, abs_read, abs_into, abs_read_into = (_m("abs", f) for f in FORMS)
    sign, sign_read, sign_into, sign_read_into = (_m("sign", f) for f in FORMS)
    select, select_read, select_into, select_read_into = (_m("select", f) for f in FORMS)
    clamp, clamp_read, clamp_into, clamp_read_into = (_m("clamp", f) for f in FORMS)
    compare, compare_read, compare_into, compare_read_into = (_compare(f) for f in FORMS)

    def elementwise_read_into(self, op: ElementwiseReadOp, inputs: Sequence, out) -> None:
        """Overwrite ``out`` with the elementwise operation ``op`` of ``inputs``.

        Parameters
        ----------
        op : ElementwiseReadOp
            Any elementwise or analytic operation, e.g. ``ElementwiseReadOp.ADD`` or
            ``ElementwiseReadOp.compare(CompareDir.LT)``.
        inputs : sequence of Tensor or TensorView
            ``op.arity`` device operands of this session (same rules as the named ops).
        out : Tensor or TensorView
            Caller-owned output of exactly the result's shape and dtype; it must not
            overlap an input.

        Returns
        -------
        None
            The result is enqueued into ``out``.

        Raises
        ------
        ValidationError
            Unknown op, wrong number of inputs, dtype/shape mismatch, bad ``out``.
        UnsupportedDTypeError
            ``op`` is not defined for the dtype.
        RuntimeStateError
            An operand is not resident on this session, or the session is closed.
        """
        name = "elementwise_read_into"
        self._begin(name)
        kind = kind_of(op, name)
        if isinstance(inputs, _Strided) or not isinstance(inputs, Iterable):
            raise ValidationError(f"inputs must be a sequence of tensors (got "
                                  f"{type(inputs).__name__})", op=name)
        self._ew_run(kind, name, tuple(inputs), out, into=True)
