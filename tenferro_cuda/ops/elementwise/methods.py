"""Factories for the functions of the elementwise-shaped families (elementwise, analytic,
cast), one per (operation, form), each ``fn(ctx, ...)`` with the public parameters and a
numpy-style docstring (the session facade turns each into a method).

A unary or binary function first tries the fast path (``fast.py``: the general path with
its planning skipped, when the call is the one plan it covers and this (kind, method,
dtype) was prepared by an earlier call), then the general path ``engine.run``, which
validates everything and raises the typed errors. A binary function is
``fast.binary_function``'s (its fast path written out in it); one whose ``lhs`` is a
scalar tries the fast path of its ``rhs``'s dtype. Ternary operations (select, clamp)
take the general path. Binary and ternary operands may be scalars (``shapes/scalars.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...exec.context import ExecContext
from ...shapes.elementwise import Kind
from ...shapes.scalars import Scalar
from ...tensor import Tensor, TensorView
from . import engine, fast

__all__ = ["SUFFIX", "make_function", "docstring"]

Impl = Callable[..., Any]
SUFFIX = {"owned": "", "read": "_read", "into": "_into", "read_into": "_read_into"}


def _unary(kind: Kind, name: str, into: bool) -> Impl:
    key = (kind.key, name)

    def owned(ctx: ExecContext, x: Tensor | TensorView) -> Tensor:
        if type(x) is Tensor:
            preps = ctx.memo.get(key)
            if preps is not None:
                p = preps.get(x.dtype)
                if p is not None:
                    res = fast.unary(p, x)
                    if res is not None:
                        return res
        return engine.run(ctx, kind, name, (x,))

    def write(ctx: ExecContext, x: Tensor | TensorView, out: Tensor | TensorView) -> None:
        if type(x) is Tensor:
            preps = ctx.memo.get(key)
            if preps is not None:
                p = preps.get(x.dtype)
                if p is not None and fast.unary(p, x, out) is not None:
                    return
        engine.run(ctx, kind, name, (x,), out)

    return write if into else owned


def _binary(kind: Kind, name: str, into: bool) -> Impl:
    return fast.binary_function(kind, name, into)


def _ternary(kind: Kind, name: str, into: bool) -> Impl:
    if kind.name == "select":
        if into:
            def select_write(ctx: ExecContext, pred: Tensor | TensorView | Scalar,
                             on_true: Tensor | TensorView | Scalar,
                             on_false: Tensor | TensorView | Scalar,
                             out: Tensor | TensorView) -> None:
                engine.run(ctx, kind, name, (pred, on_true, on_false), out)
            return select_write

        def select(ctx: ExecContext, pred: Tensor | TensorView | Scalar,
                   on_true: Tensor | TensorView | Scalar,
                   on_false: Tensor | TensorView | Scalar) -> Tensor:
            return engine.run(ctx, kind, name, (pred, on_true, on_false))
        return select
    if into:
        def clamp_write(ctx: ExecContext, x: Tensor | TensorView | Scalar,
                        lower: Tensor | TensorView | Scalar,
                        upper: Tensor | TensorView | Scalar, out: Tensor | TensorView) -> None:
            engine.run(ctx, kind, name, (x, lower, upper), out)
        return clamp_write

    def clamp(ctx: ExecContext, x: Tensor | TensorView | Scalar,
              lower: Tensor | TensorView | Scalar,
              upper: Tensor | TensorView | Scalar) -> Tensor:
        return engine.run(ctx, kind, name, (x, lower, upper))
    return clamp


def impl_for(kind: Kind, name: str, into: bool) -> Impl:
    """The function computing ``kind`` under the method name ``name``."""
    return (_unary, _binary, _ternary)[kind.arity - 1](kind, name, into)


# --- docstrings -------------------------------------------------------------------------
_PARAMS = {
    1: "x : Tensor or TensorView\n    The input: a device tensor or view of this session.",
    2: "lhs, rhs : Tensor, TensorView or scalar\n    Device operands of this session with one "
       "dtype and one shape; a rank-0\n    operand broadcasts. One of them may be a scalar "
       "(a Python or numpy bool,\n    int, float or complex): it is passed to the kernel by "
       "value and takes the\n    other's dtype, which it must fit (docs/dtypes.md).",
    3: "{0}, {1}, {2} : Tensor, TensorView or scalar\n    Device operands of this session with "
       "one shape (a rank-0 operand\n    broadcasts). Up to two may be scalars (Python or numpy "
       "bool, int, float or\n    complex, passed by value), not both branches of a select: a "
       "scalar takes the\n    dtype of its slot (the tensors' dtype; bool for a predicate), "
       "which it must\n    fit (docs/dtypes.md).",
}
_OUT = ("out : Tensor or TensorView\n    Caller-owned output of exactly the result's shape "
        "and dtype; every\n    element is overwritten. It must not overlap an input, except "
        "that it may be\n    exactly the same view as an input of the result's dtype (in "
        "place).")
_RAISES = ("Raises\n------\nValidationError\n    Dtype or shape mismatch, a bad ``out`` "
           "(shape, dtype, overlap){scalars}.\n"
           "UnsupportedDTypeError\n    The operation is not "
           "defined for the dtype.\nRuntimeStateError\n    An operand is not resident on this "
           "session, or the session is closed.")
_SCALARS = (", a scalar that does\n    not fit its dtype, no tensor operand (or no tensor "
            "branch of a select)")


def docstring(summary: str, arity: int, form: str, names: tuple[str, ...] = (),
              extra: str = "") -> str:
    """The numpy-style docstring of one generated function."""
    params = _PARAMS[arity].format(*names)
    if extra:
        params += "\n" + extra
    into = form in ("into", "read_into")
    if into:
        params += "\n" + _OUT
    returns = ("Returns\n-------\nNone\n    The result is enqueued into ``out``." if into else
               "Returns\n-------\nTensor\n    A new compact device tensor (the work is "
               "enqueued, not finished).")
    raises = _RAISES.format(scalars=_SCALARS if arity > 1 else "")
    return f"{summary}\n\nParameters\n----------\n{params}\n\n{returns}\n\n{raises}\n"


def make_function(kind: Kind, op: str, form: str, summary: str) -> tuple[str, Impl]:
    """(name, function) of the method ``op + SUFFIX[form]`` computing ``kind``."""
    name = op + SUFFIX[form]
    fn = impl_for(kind, name, form in ("into", "read_into"))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = docstring(summary, kind.arity, form, kind.roles)
    return name, fn
