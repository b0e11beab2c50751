"""A model of the CUDA driver's per-thread context stack, for the context guard's CPU
tests: ``cuCtxGetCurrent``, ``cuCtxPushCurrent``, ``cuCtxPopCurrent`` and
``cuCtxSetCurrent`` with the driver's documented semantics, returning cuda.bindings'
``(status, *values)`` tuples.

- Push puts a context on top (NULL: CUDA_ERROR_INVALID_VALUE).
- Pop takes the top off and returns it (empty stack: CUDA_ERROR_INVALID_CONTEXT).
- SetCurrent replaces the top (pushes onto an empty stack); NULL pops the top (nothing on
  an empty stack).
- GetCurrent returns the top, or NULL.

Contexts are ints (``Ctx`` wraps one so that ``int(ctx)`` works as for ``CUcontext``).
``install(monkeypatch)`` puts the model under ``tenferro_cuda._driver`` (the raw
bindings module and its checked wrappers) and makes the guard's ``current_id`` ask it
(the guard asks the faster binding otherwise), so ``exec/guard.py`` runs unchanged over it;
any other name of the bindings module (a type) is the real one.
``refuse`` holds contexts whose push fails, ``refuse_pop`` those whose pop fails (a driver
error), to test rollbacks. ``FakeRuntime`` and ``use_runtime`` open sessions over the model
(a runtime stand-in with our context and a per-thread execution context).
"""

from __future__ import annotations

import threading
from types import SimpleNamespace

from tenferro_cuda import _driver
from tenferro_cuda.exec import guard

SUCCESS = 0
INVALID_VALUE = 1
INVALID_CONTEXT = 201


class Ctx(int):
    """A context handle: an int that prints as one."""

    def __repr__(self) -> str:
        return f"Ctx({int(self)})"


NULL = Ctx(0)


class ContextStacks:
    """One context stack per thread."""

    def __init__(self) -> None:
        self._local = threading.local()
        self.calls: list[str] = []
        self.refuse: set[int] = set()
        self.refuse_pop: set[int] = set()

    @property
    def stack(self) -> list[Ctx]:
        """The calling thread's stack, bottom to top (the model's own list)."""
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def cuCtxGetCurrent(self):
        self.calls.append("get")
        return (SUCCESS, self.stack[-1] if self.stack else NULL)

    def cuCtxPushCurrent(self, ctx):
        self.calls.append("push")
        if not int(ctx) or int(ctx) in self.refuse:
            return (INVALID_VALUE,)
        self.stack.append(Ctx(int(ctx)))
        return (SUCCESS,)

    def cuCtxPopCurrent(self):
        self.calls.append("pop")
        if not self.stack or int(self.stack[-1]) in self.refuse_pop:
            return (INVALID_CONTEXT, NULL)
        return (SUCCESS, self.stack.pop())

    def cuCtxSetCurrent(self, ctx):
        self.calls.append("set")
        if not int(ctx):
            if self.stack:
                self.stack.pop()
        elif self.stack:
            self.stack[-1] = Ctx(int(ctx))
        else:
            self.stack.append(Ctx(int(ctx)))
        return (SUCCESS,)

    def CUresult(self, code: int):  # noqa: N802 - the bindings' name (status_name)
        raise ValueError(code)

    def __getattr__(self, name: str):
        """Anything else (types such as ``CUstream``) from the real bindings."""
        real = self.__dict__.get("real")
        if real is None:
            raise AttributeError(name)
        return getattr(real, name)


def install(monkeypatch) -> ContextStacks:
    """Put a fresh model under ``tenferro_cuda._driver``; returns it."""
    model = ContextStacks()
    model.real = _driver._d

    def checked(api: str):
        fn = getattr(model, api)

        def call(*args):
            return _driver.check(fn(*args), api)

        return call

    monkeypatch.setattr(_driver, "_d", model)
    # the guard's question, asked through the legacy module (now the model)
    monkeypatch.setattr(guard, "current_id", _driver.current_context_id)
    for name, api in (("ctx_get_current", "cuCtxGetCurrent"), ("ctx_push", "cuCtxPushCurrent"),
                      ("ctx_pop", "cuCtxPopCurrent"), ("ctx_set_current", "cuCtxSetCurrent")):
        monkeypatch.setattr(_driver, name, checked(api))
    return model


class FakeRuntime:
    """What the scopes, the entry checks and the raw session use of a runtime: its
    context ``context`` and one execution context per thread, made by
    ``make_context(runtime)`` (default: the fields the session's scopes, entry checks and
    sub-sessions read)."""

    def __init__(self, context: Ctx, make_context=None) -> None:
        self.context, self.context_id = context, int(context)
        self.ordinal = 0
        self.info = SimpleNamespace(name="fake")
        self.programmatic_edges = False  # (no driver graph to rewrite: graph_edges.py)
        self.waiting_functions: set[int] = set()
        self._make = make_context or _plain_context
        self._tls = threading.local()

    def check_alive(self, op: str = "") -> None:
        pass

    def current(self):
        from tenferro_cuda.exec import guard

        return guard.within(self.context, self.context_id)

    def exec_context(self):
        ctx = getattr(self._tls, "ctx", None)
        if ctx is None:
            ctx = self._tls.ctx = self._make(self)
        return ctx


def _plain_context(runtime: FakeRuntime) -> SimpleNamespace:
    ctx = SimpleNamespace(
        runtime=runtime, context=runtime.context, context_id=runtime.context_id,
        thread=threading.get_ident(), session_open=False, capture=None, closed=False,
        stream=0x77, flushes=0, eager=True, ordinal=0,
        info=SimpleNamespace(max_threads_per_block=1024, max_block_dims=(1024, 1024, 64),
                             max_grid_dims=((1 << 31) - 1, 65535, 65535),
                             max_shared_per_block=48 << 10))
    ctx.flush = lambda: setattr(ctx, "flushes", ctx.flushes + 1)
    return ctx


def use_runtime(monkeypatch, runtime: FakeRuntime) -> None:
    """Sessions of this test open over ``runtime``."""
    from tenferro_cuda import session as session_module

    monkeypatch.setattr(session_module.CudaRuntime, "get",
                        classmethod(lambda cls, ordinal=0: runtime))
