"""Analytic session methods: exp log sin cos tanh sqrt rsqrt expm1 log1p pow, each as
``op(...)`` and ``op_read(...)`` (tensors or strided views in, a new compact tensor out).

Defined for float16, bfloat16, float32, float64 (half and bfloat16 computed in float32 and
rounded once) and complex64/complex128 (``ptx/include/tenferro/cmath.cuh``); ``pow`` also
for integers, by binary powering with wrapping, where a negative exponent is a deferred
error raised by ``synchronize()`` (result 0). Integer or bool input to the others raises
``UnsupportedDTypeError``. Into-forms of every op are reachable through
``elementwise_read_into(ElementwiseReadOp.EXP, (x,), out)``.
"""

from __future__ import annotations

from ..shapes.elementwise import KINDS
from .elementwise_engine import ElementwiseEngine
from .elementwise_methods import make_method

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


def _m(op: str, form: str):
    return make_method(KINDS[op], op, form, SUMMARY[op])


class AnalyticOps(ElementwiseEngine):
    """The analytic methods of the session (see the module docstring)."""

    exp, exp_read = _m("exp", "owned"), _m("exp", "read")
    log, log_read = _m("log", "owned"), _m("log", "read")
    sin, sin_read = _m("sin", "owned"), _m("sin", "read")
    cos, cos_read = _m("cos", "owned"), _m("cos", "read")
    tanh, tanh_read = _m("tanh", "owned"), _m("tanh", "read")
    sqrt, sqrt_read = _m("sqrt", "owned"), _m("sqrt", "read")
    rsqrt, rsqrt_read = _m("rsqrt", "owned"), _m("rsqrt", "read")
    expm1, expm1_read = _m("expm1", "owned"), _m("expm1", "read")
    log1p, log1p_read = _m("log1p", "owned"), _m("log1p", "read")
    pow, pow_read = _m("pow", "owned"), _m("pow", "read")
