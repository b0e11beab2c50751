"""Analytic functions: exp log sin cos tanh sqrt rsqrt expm1 log1p pow, each as
``op(...)`` and ``op_read(...)`` (tensors or strided views in, a new compact tensor out).

Defined for float16, bfloat16, float32, float64 (half and bfloat16 computed in float32 and
rounded once) and complex64/complex128 (``ptx/include/tenferro/cmath.cuh``); ``pow`` also
for integers, by binary powering with wrapping, where a negative exponent is a deferred
error raised by ``synchronize()`` (result 0). Integer or bool input to the others raises
``UnsupportedDTypeError``. Into-forms of every op are reachable through
``elementwise_read_into(ElementwiseReadOp.EXP, (x,), out)``. They run on the elementwise
engine (``ops/elementwise``).
"""

from __future__ import annotations

from collections.abc import Callable

from ...shapes.elementwise import KINDS
from ..elementwise.methods import make_function

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

METHODS: tuple[tuple[str, Callable], ...] = tuple(
    make_function(KINDS[op], op, form, SUMMARY[op]) for op in SUMMARY
    for form in ("owned", "read"))
