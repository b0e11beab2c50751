"""The op entry of the session facade: thread, scope, runtime and context, checked once.

``op_method(name, impl)`` makes the session method ``name`` for the family function
``impl(ctx, ...)``: a real function with ``impl``'s parameters (names, defaults,
annotations) after ``ctx``, and its docstring, so ``help()``, IDEs and ``inspect`` see
the real signature (the way ``dataclasses`` writes ``__init__``). The method's usual
path is one line of checks -- the calling thread owns the session, its scope is open,
the runtime is alive and our context is current (``_driver_fast.current``: the integer
handle ``cuCtxGetCurrent`` returns, compared with ours; a failed call reads as no
context) -- then the call
(the generated methods' globals are the one dict ``SHARED``). Anything else takes
``enter``, which raises the precise ``RuntimeStateError``/``ContextLostError``, or, when
user code made another context current (or none), runs the op with ours pushed and pops
it again (``guard.call_pushed``): an op leaves the thread's context as it found it.
Before all of this, a required output parameter (``out``, ``dst``, the accumulated ``y``:
``OUTPUT_PARAMETERS``) given as None raises ValidationError: a family function may read
None as "allocate" (one function serves both forms of a binary elementwise op).

``describe(name, impl)`` gives the text of the method for the generated stub
(``_session_ops.pyi``).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from .. import _driver, _driver_fast
from ..errors import ValidationError
from . import guard
from .capture import NOT_CAPTURABLE

__all__ = ["op_method", "enter", "check", "context_of", "register_session_type",
           "describe"]


def _no_output(op: str, name: str) -> None:
    raise ValidationError(f"{name} must be a Tensor or TensorView (got None)", op=op)


# The globals of every generated method (one dict: the names are looked up per call, so
# a test may replace ``_current`` here to emulate a device).
SHARED = {"_ident": threading.get_ident, "_current": _driver_fast.current,
          "_Failure": _driver_fast.Failure, "_lost": _driver.lost_contexts,
          "_no_output": _no_output}


_session_types: list[type] = []

# The parameters through which an op writes a caller's tensor (``_into`` outputs, the
# accumulated ``y`` of axpby, ``copy_read_into``'s ``dst``), and, per op function, their
# positions after ``ctx`` (filled by ``op_method``; a capture notes what they are given).
OUTPUT_PARAMETERS = frozenset({"out", "dst", "y"})
OUTPUTS: dict[Callable, tuple[int, ...]] = {}


def register_session_type(cls: type) -> type:
    """Record the session class (``context_of`` accepts its instances)."""
    _session_types.append(cls)
    return cls


def context_of(obj: object, op: str, what: str = "destination") -> Any:
    """The ExecContext of another session passed to an op, after its entry checks."""
    if not isinstance(obj, tuple(_session_types)):
        raise ValidationError(f"{what} must be a CudaExecSession (got {type(obj).__name__})",
                              op=op)
    return check(obj, op)


def check(session: Any, op: str, method: str | None = None) -> Any:
    """The session's ExecContext after the full entry checks (raises when it may not run
    now); makes no context current. ``method`` is the session method called (default:
    ``op``); during a capture a method of ``NOT_CAPTURABLE`` is refused. A caller's own
    op name (``ensure_gpu_resident``, ``raw``, ...) names errors only: pass the method."""
    ctx = session._ctx
    session._scope.check(op)
    ctx.runtime.check_alive(op)
    if ctx.capture is not None and (op if method is None else method) in NOT_CAPTURABLE:
        ctx.capture.refuse(op)
    return ctx


def enter(session: Any, op: str, impl: Callable, args: tuple) -> Any:
    """The unusual path of an op: check everything, then run ``impl`` with our context
    current (pushed and popped when another one, or none, is current)."""
    ctx = check(session, op)
    if ctx.capture is not None:
        ctx.capture.admit(op, args, OUTPUTS.get(impl, ()))
    return guard.call_current(ctx, impl, ctx, *args)


def _parameters(impl: Callable) -> list[inspect.Parameter]:
    params = list(inspect.signature(impl).parameters.values())
    if not params or params[0].name != "ctx":
        raise TypeError(f"{impl.__qualname__} must take the ExecContext as its first "
                        "parameter, named ctx")
    return params[1:]


def op_method(name: str, impl: Callable, op: str | None = None) -> Callable:
    """The session method ``name`` running ``impl`` (errors name ``op``, default ``name``)."""
    params = _parameters(impl)
    OUTPUTS[impl] = tuple(i for i, p in enumerate(params) if p.name in OUTPUT_PARAMETERS)
    defaults = {f"_d{i}": p.default for i, p in enumerate(params)
                if p.default is not inspect.Parameter.empty}
    header, call = ["self"], []
    for i, p in enumerate(params):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"{impl.__qualname__}: parameter {p.name} must be positional "
                            "or keyword")
        if p.kind is p.KEYWORD_ONLY and "*" not in header:
            header.append("*")
        header.append(p.name if p.default is inspect.Parameter.empty else f"{p.name}=_d{i}")
        call.append(p.name)
    args = ", ".join(call)
    bound = ", ".join(["_impl", "_enter", *defaults])
    # a required output given as None is refused before anything else (a family's
    # function may read None as "allocate")
    required = "".join(
        f"        if {p.name} is None:\n            _no_output({op or name!r}, {p.name!r})\n"
        for p in params if p.name in OUTPUT_PARAMETERS and p.default is inspect.Parameter.empty)
    source = (
        f"def _make({bound}):\n"
        f"    def {name}({', '.join(header)}):\n"
        f"{required}"
        f"        ctx = self._ctx\n"
        f"        if ctx.thread == _ident() and self._scope.alive and ctx.eager:\n"
        f"            try:\n"
        f"                here = _current()\n"
        f"            except _Failure:\n"
        f"                here = 0\n"
        f"            if here == ctx.context_id and here not in _lost:\n"
        f"                return _impl(ctx, {args})\n"
        f"        return _enter(self, {op or name!r}, _impl, ({args}{',' if call else ''}))\n"
        f"    return {name}\n")
    namespace: dict = {}
    exec(compile(source, f"<session method {name}>", "exec"), SHARED, namespace)
    method = namespace["_make"](impl, enter, *defaults.values())
    method.__doc__ = impl.__doc__
    method.__qualname__ = f"CudaExecSession.{name}"
    method.__module__ = "tenferro_cuda.session"
    method.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *params],
        return_annotation=inspect.signature(impl).return_annotation)
    method.__wrapped_op__ = impl  # type: ignore[attr-defined]
    return method


def describe(name: str, impl: Callable) -> str:
    """The stub text of the method ``name`` (signature and docstring)."""
    sig = inspect.signature(impl)
    params = ["self"]
    star = False
    for p in _parameters(impl):
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        text = p.name
        if p.annotation is not inspect.Parameter.empty:
            text += f": {p.annotation}"
        if p.default is not inspect.Parameter.empty:
            text += " = ..."
        params.append(text)
    ret = sig.return_annotation
    ret_text = "" if ret is inspect.Signature.empty else f" -> {ret}"
    doc = inspect.cleandoc(impl.__doc__ or "").replace('"""', r'\"\"\"')
    body = "\n".join(("        " + line).rstrip() for line in doc.splitlines())
    return (f"    def {name}({', '.join(params)}){ret_text}:\n"
            f'        """{body.strip()}\n        """\n'
            f"        ...\n")
