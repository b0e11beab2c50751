"""Analytic functions: exp log sin cos tanh sqrt rsqrt expm1 log1p pow, each as
``op(...)`` and ``op_read(...)`` (tensors or strided views in, a new compact tensor out),
and logistic tan atan2 cbrt (StableHLO), each in the four forms of the elementwise ops
(``op``, ``op_read``, ``op_into``, ``op_read_into``).

Defined for float16, bfloat16, float32, float64 (half and bfloat16 computed in float32 and
rounded once) and complex64/complex128 (``ptx/include/tenferro/cmath.cuh``); ``pow`` also
for integers, by binary powering with wrapping, where a negative exponent is a deferred
error raised by ``synchronize()`` (result 0). Integer or bool input to the others raises
``UnsupportedDTypeError``. Into-forms of the first ten are reachable through
``elementwise_read_into(ElementwiseReadOp.EXP, (x,), out)``. Complex ``tan``, ``logistic``,
``atan2`` and ``cbrt`` follow StableHLO's reference formulas: ``tan z = -i tanh(iz)``,
``atan2(y, x) = -i log((x + iy) / sqrt(x^2 + y^2))``, the principal cube root. They run on
the elementwise engine (``ops/elementwise``).
"""

from __future__ import annotations

from collections.abc import Callable

from ...shapes.elementwise import KINDS
from ..elementwise.methods import SUFFIX, make_function

__all__ = ["METHODS"]

SUMMARY = {
    "exp": "Elementwise ``e ** x``.",
    "log": "Elementwise natural logarithm (complex: principal branch).",
    "sin": "Elementwise sine.",
    "cos": "Elementwise cosine.",
    "tanh": "Elementwise hyperbolic tangent.",
    "sqrt": "Elementwise square root (complex: principal branch).",
    "rsqrt": "Elementwise ``1 / sqrt(x)``.",
    "expm1": "Elementwise ``exp(x) - 1``, accurate near 0.",
    "log1p": "Elementwise ``log(1 + x)``, accurate near 0.",
    "pow": "Elementwise ``lhs ** rhs``; integers by binary powering with wrapping (a "
           "negative exponent is a deferred error).",
}
# The StableHLO additions, in all four forms.
SUMMARY_ALL_FORMS = {
    "logistic": "Elementwise ``1 / (1 + exp(-x))``.",
    "tan": "Elementwise tangent (complex: ``-i tanh(i x)``).",
    "atan2": "Elementwise ``atan2(lhs, rhs)``: the angle of the point ``(rhs, lhs)`` "
             "(complex: ``-i log((rhs + i lhs) / sqrt(rhs**2 + lhs**2))``).",
    "cbrt": "Elementwise cube root (complex: the principal root).",
}

METHODS: tuple[tuple[str, Callable], ...] = (
    *(make_function(KINDS[op], op, form, SUMMARY[op]) for op in SUMMARY
      for form in ("owned", "read")),
    *(make_function(KINDS[op], op, form, SUMMARY_ALL_FORMS[op]) for op in SUMMARY_ALL_FORMS
      for form in SUFFIX))
