"""CUDA graphs: ``with s.capture() as g:`` records session work once; ``g.replay()``
enqueues all of it again for one launch (docs/graphs.md).

- Capture (``_CaptureScope``): the session stream enters capture mode; session ops, fusion
  plans, ``dot_general`` (on a cuBLAS workspace the graph owns), raw and kernel-session
  bodies are recorded, not run. What cannot be captured (``exec/capture.NOT_CAPTURABLE``
  and every host barrier) raises ``RuntimeStateError`` at once and abandons the capture.
  On a normal exit the graph is instantiated; on an exception it is discarded.
- Memory: tensors made during the capture are graph-owned (``exec/capture.GraphMemory``):
  the same memory on every replay, released by ``g.close()`` (or when ``g`` and every such
  tensor are gone); a tensor still held after ``close()`` is unusable. Tensors the capture
  was given are kept alive by the graph.
- Replay enqueues only. ``replay(inputs={t: other})`` runs the graph on ``other`` instead
  of ``t`` (a tensor or view the capture used: an input, or the output of an ``_into``
  op), with the same dtype, shape and strides: the addresses inside ``t``'s view are moved
  in the kernel, memcpy and memset nodes (``graph_rebind.py``) -- no copy; a set of
  tensors used again replays an executable graph already bound to it. Residency, layout
  and overlap are checked before anything is enqueued (``ValidationError``).
- Deferred device errors of replayed kernels surface at the next ``synchronize()``,
  naming the captured op. A graph belongs to its session's thread and scope.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Mapping
from typing import Any

from . import _driver_graph as dg
from ._dlpack_export import exports_over
from .authority import Authority
from .errors import BackendSourceError, RuntimeStateError, ValidationError
from .exec import entry, guard
from .exec.capture import CaptureState, GraphMemory, refused
from .exec.residency import resident
from .graph_edges import make_programmatic
from .graph_rebind import Executables, check_placement, sites_of, written_keys
from .memo import BoundedCache
from .shapes.aliasing import byte_range, check_writable
from .tensor import Tensor, _Strided

__all__ = ["CudaGraph"]

_ident = threading.get_ident


class CudaGraph(Authority):
    """An instantiated capture of session work (see the module docstring)."""

    __slots__ = ("_session", "_ctx", "_state", "_graph", "_exec", "_memory", "_external",
                 "_kept", "_ops", "_fixed", "_written", "_scalars", "_spans", "_table", "_sites",
                 "_execs", "_bound", "_raises", "_placements", "__weakref__")
    _session: Any
    _ctx: Any
    _state: CaptureState | None
    _graph: int
    _exec: int  # the executable graph instantiated at capture (0: closed)
    _memory: GraphMemory
    _external: dict[int, Any]  # id -> a tensor or view the capture was given
    _kept: tuple  # the buffers of those tensors
    _ops: tuple[str, ...]  # the captured ops' names, in order
    _fixed: set[int]  # id of tensors read through a device pointer table
    _written: set[int]  # id of tensors whose memory the graph writes (graph_rebind)
    _scalars: frozenset[int]  # the parameter words the captured scalar operands may be
    _spans: dict[int, tuple[int, int]]  # id -> the captured view's byte range
    _table: Any  # the NodeTable (read on the first rebinding)
    _sites: dict[int, list]
    _execs: Any  # graph_rebind.Executables (made on the first rebinding)
    _bound: dict[int, Any]  # id(tensor) -> the tensor it is bound to
    _raises: bool  # a captured kernel may write the error word
    _placements: BoundedCache  # the shifts that passed the overlap checks

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("CudaGraph is made by CudaExecSession.capture()")

    @classmethod
    def _begin(cls, session: Any, state: CaptureState) -> CudaGraph:
        self = object.__new__(cls)
        self._session, self._ctx, self._state = session, state.ctx, state
        self._graph = self._exec = 0
        self._memory = state.memory
        self._external, self._kept, self._ops, self._fixed, self._spans = {}, (), (), set(), {}
        self._written, self._scalars, self._raises = set(), frozenset(), False
        self._table, self._sites, self._execs, self._bound = None, {}, None, {}
        self._placements = BoundedCache(256)
        return self

    def _ready(self, state: CaptureState, graph: int, exe: int) -> None:
        self._graph, self._exec, self._state = graph, exe, None
        self._external = dict(state.external)
        self._kept = tuple(state.kept.values())
        self._ops = tuple(state.ops)
        self._fixed = set(state.table_users)
        self._written = written_keys(state.external, state.written)
        self._scalars = frozenset(state.scalars)
        self._spans = {key: byte_range(t) for key, t in self._external.items()}
        # a captured kernel may write the error word: each replay makes synchronize read it
        self._raises = state.ctx.errors.count != state.errors_from

    # --- what it holds -----------------------------------------------------------------
    @property
    def inputs(self) -> tuple:
        """The tensors the capture was given (what ``replay(inputs=...)`` may rebind);
        none once the graph is closed."""
        self._check_lent("inputs")
        return tuple(self._external.values())

    @property
    def ops(self) -> tuple[str, ...]:
        """The names of the captured ops, in order."""
        self._check_lent("ops")
        return self._ops

    @property
    def closed(self) -> bool:
        """Whether the graph was released (or its capture discarded)."""
        self._check_lent("closed")
        return not self._exec

    def _check_lent(self, op: str) -> None:
        """The checks of every lent object: the session's thread and scope."""
        if self._ctx.thread != _ident():
            raise RuntimeStateError("this graph belongs to another thread", op=op)
        self._session._scope.check(op)

    # --- replay ------------------------------------------------------------------------
    def _check(self, op: str) -> Any:
        ctx = self._ctx
        if not self._exec:
            what = "still being captured" if self._state is not None else "closed"
            raise RuntimeStateError(f"this graph is {what}", op=op)
        if ctx.thread != _ident():
            raise RuntimeStateError("this graph belongs to another thread; a graph is "
                                    "replayed on the thread that captured it", op=op)
        entry.check(self._session, op)
        if ctx.capture is not None:
            ctx.capture.refuse(op)
        for buf in self._kept:
            if buf.home is None:
                raise RuntimeStateError("a tensor this graph uses was reclaimed; the graph "
                                        "cannot be replayed", op=op)
        return ctx

    def replay(self, inputs: Mapping | None = None) -> None:
        """Enqueue the whole graph on the session stream (nothing else is done).

        ``inputs`` maps tensors the capture used to tensors of the same dtype, shape and
        strides to run on instead, for this replay (tensors not named run on their own)."""
        ctx = self._check("replay")
        status = guard.call_current(ctx, self._launch, ctx, inputs)
        if status:
            from ._driver import error_for

            raise error_for("cuGraphLaunch", status, "replay")

    def _launch(self, ctx: Any, inputs: Mapping | None) -> int:
        """Launch the executable graph bound to ``inputs`` (binding one when needed); the
        status."""
        if inputs is not None:
            exe = self._rebind(ctx, inputs)
        elif self._execs is not None:  # rebound before: the one holding the captured tensors
            exe = self._execs.select({}, ctx.context_id)
        else:
            exe = self._exec
        if self._raises:
            ctx.errors.count += 1
        return dg.lib().cuGraphLaunch(exe, int(ctx.stream))

    def _rebind(self, ctx: Any, inputs: Mapping) -> int:
        op = "replay"
        if type(inputs) is not dict and not isinstance(inputs, Mapping):
            raise ValidationError(f"inputs must be a mapping of tensors (got "
                                  f"{type(inputs).__name__})", op=op)
        external, home = self._external, ctx.home
        moved: dict[int, int] = {}  # id(key) -> nonzero shift: the placement
        bound: dict[int, Any] = {}
        for key, new in inputs.items():
            key_id = id(key)
            captured = external.get(key_id)
            if captured is None or captured is not key:
                raise ValidationError("inputs keys must be tensors this graph was captured "
                                      "with (see CudaGraph.inputs)", op=op)
            if key_id in self._fixed:
                raise ValidationError("this tensor is read through a device pointer table "
                                      "(grouped_gemm) and cannot be rebound", op=op)
            if type(new) is not Tensor and not isinstance(new, _Strided):
                raise ValidationError(f"inputs values must be tensors (got "
                                      f"{type(new).__name__})", op=op)
            buf = new.base.buffer
            if buf is None or buf.home is not home:
                resident(ctx, new, op, "input")  # raises the residency error
            if key_id in self._written:  # the graph writes it: no read-only memory
                check_writable(new, op, "a rebound output")
            if new.dtype is not key.dtype or new.shape != key.shape \
                    or new.strides != key.strides:
                raise ValidationError(
                    f"a rebound tensor must match the captured one in dtype, shape and "
                    f"strides (captured {key.dtype.name}{list(key.shape)} strides "
                    f"{key.strides}, got {new.dtype.name}{list(new.shape)} strides "
                    f"{new.strides})", op=op)
            shift = new.data_ptr() - key.data_ptr()
            if shift:
                moved[key_id] = shift
            bound[key_id] = new
        # What the overlap checks depend on, alone: a tensor bound to itself moves nothing
        # and is checked as if it were not named.
        placement = frozenset(moved.items())
        if placement not in self._placements:
            check_placement(self, moved, op)
            self._placements.put(placement, True)
        if self._execs is None:  # (given no method of the graph: no reference cycle)
            table = self._nodes()
            self._execs = Executables(self._graph, self._exec, table, self._spans,
                                      functools.partial(sites_of, self._sites,
                                                        self._external, table))
        exe = self._execs.select(moved, ctx.context_id, placement)
        self._bound = bound
        return exe

    def _nodes(self) -> Any:
        if self._table is None:
            from .graph_rebind import NodeTable

            self._table = NodeTable(self._graph)
        return self._table

    def _sites_of(self, key_id: int) -> list:
        """The node addresses a rebinding of the tensor ``key_id`` moves
        (``graph_rebind.sites_of``)."""
        return sites_of(self._sites, self._external, self._nodes(), key_id)

    # --- release -----------------------------------------------------------------------
    def close(self) -> None:
        """Release the graph and the memory it owns (idempotent). Replays already
        enqueued finish first (the memory is given back in stream order)."""
        if self._ctx.thread != _ident():
            raise RuntimeStateError("this graph belongs to another thread", op="close")
        if self._state is not None:
            raise RuntimeStateError("this graph is still being captured: close it after "
                                    "its capture scope ends", op="close")
        self._release()

    def _release(self) -> None:
        exe, graph, execs = self._exec, self._graph, self._execs
        self._exec = self._graph = 0
        self._execs = None
        for handle in execs.handles() if execs is not None else (exe,) if exe else ():
            dg.lib().cuGraphExecDestroy(handle)
        if graph:
            dg.lib().cuGraphDestroy(graph)
        self._memory.close(held=exports_over)  # (what a DLPack consumer holds stays)
        # nothing of the tensors it was given stays held (a closed graph never replays)
        self._kept, self._bound, self._external, self._spans = (), {}, {}, {}
        self._sites, self._table, self._placements = {}, None, BoundedCache(1)

    def __del__(self) -> None:
        try:  # destroying a graph touches no thread's context; memory goes back queued
            if (self._exec or self._graph) and not sys.is_finalizing():
                self._release()
        except Exception:  # noqa: BLE001 - a finalizer never raises
            pass

    def __repr__(self) -> str:
        state = ("capturing" if self._state is not None else
                 "closed" if not self._exec else f"{len(self._ops)} ops")
        return f"<CudaGraph {state}>"


class CaptureScope(Authority):
    """The ``with`` block of ``CudaExecSession.capture()``. Exited from another thread
    (a suspended generator collected there, say), it ends nothing: the capture stays open
    until the session's thread abandons it (a refused op, the session's exit, or the next
    session's entry). On its own thread an exception, ``GeneratorExit`` included,
    discards the capture."""

    __slots__ = ("_session", "_graph", "_guard")

    def __init__(self, session: Any) -> None:
        self._session = session
        self._graph: CudaGraph | None = None
        self._guard: guard.ScopeGuard | None = None

    def __enter__(self) -> CudaGraph:
        op = "capture"
        if self._graph is not None:
            raise ValidationError("a capture scope is entered once", op=op)
        ctx = entry.check(self._session, op)
        if ctx.capture is not None:
            ctx.capture.refuse(op)
        # ours pushed for the body; the stack is the caller's again at exit (a raw scope's
        # guard: whatever the body pushed, popped or set)
        scope_guard = guard.ScopeGuard(ctx.context, op)
        begun = False
        try:
            ctx.flush()
            if ctx._blas is None:  # cuBLAS handles are made before capture, never in it
                try:
                    ctx.blas(op)
                except BackendSourceError:
                    pass
            memory = GraphMemory(ctx.home, ctx.auxiliary_stream())
            state = CaptureState(ctx, memory)
            graph = CudaGraph._begin(self._session, state)
            # the arena and the context say "capturing" before the stream does: another
            # thread's release or synchronize never reaches a stream already capturing
            ctx.home.begin_graph(memory)
            ctx.capture, ctx.eager = state, False
            begun = True
            dg.begin_capture(int(ctx.stream), op)
        except BaseException:
            if begun:  # the stream may capture already (an interrupt after the begin)
                status, handle = state.finish()  # ends it; runs what was deferred to it
                if handle:
                    dg.lib().cuGraphDestroy(handle)
                memory.close()
            scope_guard.exit()
            raise
        self._guard = scope_guard
        self._graph = graph
        return graph

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        scope_guard, self._guard = self._guard, None
        try:
            self._end(exc_type)
        finally:
            if scope_guard is not None:
                scope = self._session._scope
                if exc_type is GeneratorExit or not scope.live:  # collected, or late:
                    scope_guard.abandon()  # a scope not exited normally restores nothing
                else:
                    scope_guard.exit()  # (from another thread it only abandons)

    def _end(self, exc_type: Any) -> None:
        graph = self._graph
        if graph is None or graph._state is None:
            return
        state: CaptureState = graph._state
        ctx = graph._ctx  # the session's ExecContext (the state's owner)
        if state.abandoned:
            graph._state = None
            if exc_type is None:
                if state.refused:
                    raise refused(state.refused)
                raise RuntimeStateError(f"the capture was abandoned by {state.abandoned}; "
                                        "nothing was recorded", op="capture")
            return
        if ctx.thread != _ident():
            if exc_type is None:
                raise RuntimeStateError("a capture ends on the thread that began it",
                                        op="capture")
            return
        with ctx.runtime.current():
            try:
                if exc_type is None:
                    ctx.flush()
            finally:
                status, handle = state.finish()
        graph._state = None if exc_type is not None or status else state
        if exc_type is not None or status:
            if handle:
                dg.lib().cuGraphDestroy(handle)
            state.memory.close()
            if exc_type is None:
                from ._driver import error_for

                cause = error_for("cuStreamEndCapture", status)
                raise RuntimeStateError(f"the capture failed: {cause}; the session stays "
                                        "usable", op="capture")
            return
        try:
            state.memory.settle("capture")
            if ctx.runtime.programmatic_edges:
                make_programmatic(handle, ctx.runtime.waiting_functions)
            exe = dg.instantiate(handle, "capture")
        except BaseException:
            dg.lib().cuGraphDestroy(handle)
            state.memory.close()
            graph._state = None
            raise
        graph._ready(state, handle, exe)
