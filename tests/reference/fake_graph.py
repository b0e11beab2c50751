"""Stand-ins for the graph tests on the CPU: recorders for every driver call a capture
makes (the ``driver`` fixture), the execution-context fields the capture machinery reads
(``FakeCtx``, ``FakeSession``), tensors on its arena, a graph ready for replay over given
tensors (``ready_graph``), and a node table that records what a rebinding moves."""

from __future__ import annotations

import contextlib
import gc
import threading
from types import SimpleNamespace

import pytest
from reference.fake_ctx_stack import Ctx
from reference.fake_ctx_stack import install as install_stack

from tenferro_cuda import _driver_graph, _driver_memory
from tenferro_cuda.authority import Scope
from tenferro_cuda.dtypes import DType
from tenferro_cuda.exec import capture as cap
from tenferro_cuda.exec.device_errors import ErrorWatch
from tenferro_cuda.graph import CudaGraph
from tenferro_cuda.memory import _Arena
from tenferro_cuda.tensor import Tensor

__all__ = ["FakeLib", "driver", "FakeRuntime", "FakeCtx", "FakeSession", "tensor",
           "ready_graph", "FakeTable"]


class FakeLib:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, *args))
            return 0
        return call


@pytest.fixture
def driver(monkeypatch):
    """Recorders for every driver call a capture makes (graphs of earlier tests are
    collected first: a graph released later would call this test's recorders)."""
    gc.collect()
    log = SimpleNamespace(begin=[], end=[], instantiate=[], allocs=[], syncs=[], lib=FakeLib(),
                          end_status=0)
    monkeypatch.setattr(_driver_graph, "begin_capture", lambda s, op: log.begin.append(s))

    def end(stream):
        log.end.append(stream)
        return log.end_status, 0xA000 + len(log.end)
    monkeypatch.setattr(_driver_graph, "end_capture", end)
    monkeypatch.setattr(_driver_graph, "instantiate",
                        lambda g, op: log.instantiate.append(g) or 0xE000 + g)
    monkeypatch.setattr(_driver_graph, "lib", lambda: log.lib)
    next_ptr = [0x7F0000000000]

    def alloc(nbytes, pool, stream, op=""):
        next_ptr[0] += 1 << 20
        log.allocs.append((nbytes, stream))
        return next_ptr[0]
    monkeypatch.setattr(_driver_memory, "mem_alloc_async", alloc)
    monkeypatch.setattr(cap._driver, "stream_synchronize", lambda s, op="": log.syncs.append(s))
    log.stacks = install_stack(monkeypatch)  # a capture scope guards the context stack
    return log


class FakeRuntime:
    identity = SimpleNamespace(serial=1)
    programmatic_edges = False  # (graph_edges.py: no driver graph to rewrite here)
    waiting_functions: frozenset[int] = frozenset()

    def check_alive(self, op):
        pass

    def current(self):
        return contextlib.nullcontext()


class FakeCtx:
    """The ExecContext fields the capture machinery reads."""

    def __init__(self) -> None:
        addresses = iter(range(0x7E0000000000, 0x7F0000000000, 1 << 16))
        pool = SimpleNamespace(limit=None, closed=False, handle=1, live_bytes=0,
                               stats=lambda: {"live_bytes": 0},
                               driver_alloc=lambda nbytes, arena, op: next(addresses),
                               driver_free=lambda ptr, stream: None)
        self.home = _Arena(pool, "stream")  # type: ignore[arg-type]
        self.stream, self.thread, self.closed, self.eager = 7, threading.get_ident(), False, True
        self.capture, self._blas, self.runtime = None, None, FakeRuntime()
        self.flushed, self.ordinal, self.domain = 0, 0, 1
        self.context = Ctx(0x51)  # pushed by a capture scope's guard (the fake stack)
        self.context_id = int(self.context)
        self.errors = ErrorWatch()

    def flush(self):
        self.flushed += 1

    def alloc(self, dtype, shape, op=""):
        """A compact tensor from the arena (graph memory while a capture runs)."""
        n = 1
        for e in shape:
            n *= e
        return Tensor._make(dtype, tuple(shape), buffer=self.home.alloc(n * dtype.itemsize, op))

    def blas(self, op):
        from tenferro_cuda.errors import BackendSourceError

        raise BackendSourceError("no cuBLAS here", op=op)

    def auxiliary_stream(self):
        return 99


class FakeSession:
    def __init__(self) -> None:
        self._ctx, self._scope = FakeCtx(), Scope("session")


def tensor(ctx, shape=(4,), dtype=DType.FLOAT32):
    return Tensor._make(dtype, shape, buffer=ctx.home.alloc(4 * 64))


def ready_graph(driver, session, tensors, blocks=()):
    ctx = session._ctx
    state = cap.CaptureState(ctx, cap.GraphMemory(ctx.home, 99))
    for t in tensors:
        state._note(t, False)
    state.memory.blocks.extend(blocks)
    g = CudaGraph._begin(session, state)
    g._ready(state, 0xA1, 0xE1)
    return g


class FakeTable:
    def __init__(self):
        self.moves, self.pushes = [], 0

    def sites(self, lo, hi):
        return [(lo, hi)]


    def move(self, sites, shift):
        self.moves.append((sites[0], shift))

    def push(self, exe, entries, context):
        self.pushes += len(list(entries))


def capture_context(runtime) -> FakeCtx:
    """The execution context of ``runtime`` (a ``fake_ctx_stack.FakeRuntime``) for the
    tests that open real sessions and capture scopes over the context-stack model: a
    ``FakeCtx`` with the runtime's context."""
    ctx = FakeCtx()
    ctx.runtime, ctx.context, ctx.context_id = runtime, runtime.context, runtime.context_id
    ctx.session_open = False
    return ctx


@pytest.fixture
def capture_model(monkeypatch, driver):
    """The context-stack model (``fake_ctx_stack``) with sessions over a runtime whose
    contexts are ``capture_context``'s; the driver's graph calls recorded (``driver``)."""
    from reference.fake_ctx_stack import FakeRuntime, install, use_runtime

    model = install(monkeypatch)
    use_runtime(monkeypatch, FakeRuntime(Ctx(0x1000), capture_context))
    return model
