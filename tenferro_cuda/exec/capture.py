"""Stream capture in the execution core: what a capture records, refuses and owns.

While ``ctx.capture`` is set, the context's stream is in capture mode and every op takes
the facade's unusual path (``ctx.eager`` is False), where ``CaptureState.admit`` runs
before the op:

- an op in ``NOT_CAPTURABLE`` (it blocks the host, reads device memory back, takes host
  data, or orders itself against another stream) abandons the capture -- capture ended,
  graph discarded, memory given back, the stream usable again -- and raises
  ``RuntimeStateError`` naming the op and saying "not allowed during capture". The
  context's own host barriers (``wait``, ``download``, ``upload``) call ``refuse`` too, so
  no op can reach the host on its capture path;
- every tensor an op is given is noted: the graph keeps the buffers it reads or writes
  alive (a replay never reads memory that was freed and handed out again), and these are
  the tensors a replay may rebind.

``GraphMemory`` is the memory of the tensors made during capture. The arena's recycled
lists are set aside for the capture (``_Arena.begin_graph``), so allocations reach
``GraphMemory.alloc``: a recycled block (taken for good) or a new one allocated from the
pool on the context's auxiliary stream, which is not captured (a pool allocation on the
capturing stream would become a graph node that frees on replay). The blocks are the same
on every replay and go back to the arena when the graph is closed; buffers still held then
become unusable. Frees of other buffers during the capture wait until it ends.
"""

from __future__ import annotations

import struct
import sys
import weakref
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .. import _driver, _driver_graph, _driver_memory
from ..authority import Authority
from ..errors import OutOfMemoryError, RuntimeStateError

if TYPE_CHECKING:
    from ..memory import DeviceBuffer, _Arena

__all__ = ["NOT_CAPTURABLE", "CaptureState", "GraphMemory", "refused"]

# Session methods that cannot be recorded into a graph.
NOT_CAPTURABLE = frozenset({
    "synchronize",  # blocks the host
    "download_to_host",  # reads device memory back
    "upload_host_tensor",  # takes pageable host data
    "from_dlpack", "from_cuda_array_interface",  # order against a producer's stream
    "copy_to",  # orders two streams, one of them not captured
    "reclaim_buffer",  # frees memory a replay may still use
    "release_cached_memory",  # synchronizes
    "capture",  # a second capture nested in the first
})

# Ops whose kernels read addresses from a table in device memory (not rebindable).
TABLE_OPS = frozenset({"grouped_gemm"})
# Ops that run cuBLAS: a capture points it at a workspace the graph owns first.
BLAS_OPS = frozenset({"dot_general", "dot_general_read_into", "dot_general_read_into_accum",
                      "dot_general_read_into_accum_cached", "grouped_gemm"})


def refused(op: str) -> RuntimeStateError:
    return RuntimeStateError(
        f"{op} is not allowed during capture (it needs the host or another stream "
        "mid-stream); the capture was abandoned and the session stays usable", op=op)


class GraphMemory(Authority):
    """The blocks of the tensors made during one capture (see the module docstring)."""

    __slots__ = ("arena", "stream", "blocks", "buffers", "deferred", "constants", "closed",
                 "__weakref__")
    pool_memory = True  # its blocks come from the runtime's pool (DeviceBuffer.pooled)

    def __init__(self, arena: _Arena, aux_stream: Any) -> None:
        self.arena, self.stream = arena, aux_stream
        self.blocks: list[tuple[int, int]] = []
        self.buffers: list[weakref.ref] = []
        self.deferred: list[tuple[int, int]] = []  # frees asked for during the capture
        self.constants: list = []  # host arrays being copied in, until ``settle``
        self.closed = False

    def alloc(self, nbytes: int, op: str) -> DeviceBuffer:
        """A graph-owned buffer of ``nbytes``, asked for by the arena's ``_alloc`` (which
        rounds the size and checks the pool's limit first: the only caller)."""
        from ..memory import DeviceBuffer

        arena = self.arena
        pool = arena.pool
        saved = arena.saved_lists.get(nbytes)
        if saved:
            ptr = saved.pop()
            arena.cached_bytes -= nbytes
        else:
            try:
                ptr = _driver_memory.mem_alloc_async(nbytes, pool.handle, self.stream, op)
            except OutOfMemoryError as exc:  # with the pool's statistics, as eagerly
                raise OutOfMemoryError(f"{exc.args[0]}; pool: {pool.stats()}", op=op,
                                       requested_bytes=nbytes) from exc.__cause__
            arena.held_bytes += nbytes
        arena.allocations += 1
        self.blocks.append((ptr, nbytes))
        buf = DeviceBuffer(ptr, nbytes, arena, owner=self)
        self.buffers.append(weakref.ref(buf))
        return buf

    def owns(self, ptr: int, nbytes: int) -> bool:
        """Whether ``[ptr, ptr + nbytes)`` lies in one block of this memory."""
        return any(b <= ptr and ptr + nbytes <= b + n for b, n in self.blocks)

    def settle(self, op: str) -> None:
        """Wait for the allocations and copies on the auxiliary stream (after the capture
        ended)."""
        if self.blocks:
            _driver.stream_synchronize(self.stream, op)
        self.constants.clear()

    def close(self, held: Any = None) -> None:
        """Give every block back to the arena (stream-ordered after the replays enqueued
        so far) and make the buffers still held unusable; idempotent, never raises.
        ``held(buffer)``: whether another library still holds the buffer's memory (an
        export); such a block is given back only when the buffer goes (``_HeldBlock``)."""
        if self.closed:
            return
        self.closed = True
        kept = set()
        for ref in self.buffers:
            buf = ref()
            if buf is not None:
                buf.home = None
                exported = held is not None and _held(held, buf)
                buf.owner = _HeldBlock(self.arena, buf.ptr, buf.nbytes) if exported else None
                if exported:
                    kept.add(buf.ptr)
        self.buffers.clear()
        blocks, self.blocks = self.blocks, []
        for ptr, nbytes in blocks:
            if ptr in kept:
                continue
            try:
                self.arena.give_back(ptr, nbytes)
            except Exception:  # noqa: BLE001 - a release never raises
                pass

    def __del__(self) -> None:
        if not sys.is_finalizing():
            self.close()


def _held(held: Any, buf: Any) -> bool:
    try:
        return bool(held(buf))
    except Exception:  # noqa: BLE001 - when in doubt, keep the block
        return True


class _HeldBlock:
    """The block of a graph-owned buffer that another library still held when its graph
    closed: given back to the arena when the buffer goes (the buffer is its only
    holder), on whatever thread that happens (``_Arena.give_back`` queues it then)."""

    __slots__ = ("arena", "ptr", "nbytes")
    pool_memory = True  # (DeviceBuffer.pooled)
    held_block = True  # (_dlpack_export: its release orders our stream after the consumer)

    def __init__(self, arena: Any, ptr: int, nbytes: int) -> None:
        self.arena, self.ptr, self.nbytes = arena, ptr, nbytes

    def __del__(self) -> None:
        if not sys.is_finalizing():
            try:
                self.arena.give_back(self.ptr, self.nbytes)
            except Exception:  # noqa: BLE001 - a release never raises
                pass


class Capturing(Protocol):
    """What a capture uses of its execution context (``exec/context.ExecContext``, which
    owns the capture: the capture only flips its mode back and reads its stream, arena
    and cuBLAS)."""

    thread: int
    stream: Any
    home: _Arena
    closed: bool
    eager: bool
    capture: CaptureState | None
    errors: Any  # the ErrorWatch of the error word (device_errors.py)
    _blas: Any


_MASK64 = (1 << 64) - 1
_F64, _U64, _F32X2 = struct.Struct("<d"), struct.Struct("<Q"), struct.Struct("<ff")


_SCALARS = (int, float, complex, np.integer, np.floating, np.complexfloating)


def scalar_words(value: object) -> tuple[int, ...]:
    """The 8-byte kernel-parameter words a scalar operand may be passed as: the bits of a
    64-bit integer, of a float64, and of the parts of a complex128 or a complex64
    (narrower values fill less than a word)."""
    if isinstance(value, (bool, np.bool_)):
        return ()
    if isinstance(value, (int, np.integer)):
        return (int(value) & _MASK64,)
    if isinstance(value, (float, np.floating)):
        return (_U64.unpack(_F64.pack(float(value)))[0],)
    z = complex(value)  # type: ignore[call-overload]
    words = [_U64.unpack(_F64.pack(z.real))[0], _U64.unpack(_F64.pack(z.imag))[0]]
    try:
        words.append(_U64.unpack(_F32X2.pack(z.real, z.imag))[0])
    except OverflowError:
        pass
    return tuple(words)


class CaptureState(Authority):
    """One capture in progress on one execution context (see the module docstring)."""

    __slots__ = ("ctx", "memory", "external", "kept", "ops", "table_users", "written",
                 "scalars", "abandoned", "refused", "blas_workspace", "errors_from", "after")

    def __init__(self, ctx: Capturing, memory: GraphMemory) -> None:
        self.ctx, self.memory = ctx, memory
        self.external: dict[int, Any] = {}  # id -> tensor or view given to an op
        self.kept: dict[int, DeviceBuffer] = {}  # id -> buffer the graph uses (kept alive)
        self.ops: list[str] = []
        self.table_users: set[int] = set()  # id of tensors given to a TABLE_OPS op
        self.written: set[int] = set()  # id of tensors given as an op's output
        self.scalars: set[int] = set()  # the parameter words scalar operands may become
        self.abandoned = ""  # why the capture ended early: a refused op, a session's end
        self.refused = ""  # the op refused, when that was why
        self.blas_workspace: DeviceBuffer | None = None
        self.errors_from = ctx.errors.count  # more at the end: a kernel may write the word
        # stream work asked for during the capture that must not be recorded (an export's
        # release ordering our stream after its consumer's): run as the capture ends,
        # before its deferred frees make memory reusable (``defer``)
        self.after: list[Any] = []

    def admit(self, op: str, args: tuple, outputs: tuple[int, ...] = ()) -> None:
        """Refuse ``op`` or note the tensors it is given (``args[i]`` for ``i`` in
        ``outputs`` is written by the op, as is every grouped job's ``out``)."""
        if op in NOT_CAPTURABLE:
            self.refuse(op)
        self.ops.append(op)
        if op in BLAS_OPS and self.ctx._blas is not None:
            self.blas_ready(self.ctx._blas, op)
        table = op in TABLE_OPS
        self.written.update(id(args[i]) for i in outputs if i < len(args))
        for arg in args:
            jobs = getattr(arg, "jobs", None)  # a GroupedGemmConfig
            if isinstance(jobs, tuple):
                self.written.update(id(job.out) for job in jobs)
            items = ([t for job in jobs for t in (job.lhs, job.rhs, job.out)]
                     if isinstance(jobs, tuple) else
                     arg if isinstance(arg, (list, tuple)) else
                     arg.values() if isinstance(arg, dict) else (arg,))
            for item in items:
                for value in (item if isinstance(item, (list, tuple)) else (item,)):
                    if isinstance(value, _SCALARS):
                        self.scalars.update(scalar_words(value))
                    else:
                        self._note(value, table)

    def note(self, t: object, written: bool = False) -> None:
        """Note a tensor an extension's body uses during the capture (a raw or kernel
        session's ``tensor``/``tensor_mut``/``copy_bytes``/``scale_tensor_write``): kept
        alive by the graph, listed in ``inputs`` and rebindable like an op's; ``written``
        when the body writes it."""
        self._note(t, False)
        if written:
            self.written.add(id(t))

    def _note(self, value: object, table: bool) -> None:
        buf = getattr(getattr(value, "base", value), "buffer", None)
        if buf is None or getattr(buf, "home", None) is None:
            return
        if buf.owner is not self.memory:
            self.external[id(value)] = value
            self.kept[id(buf)] = buf
            if table:
                self.table_users.add(id(value))

    def upload_constant(self, dst: int, data: Any, op: str) -> None:
        """Copy the C-contiguous host array ``data`` to ``dst`` (graph memory) on the
        auxiliary stream: done once, before the graph is instantiated, and read by every
        replay (a device table of addresses, say)."""
        if not self.memory.owns(dst, data.nbytes):
            raise RuntimeStateError("a table uploaded during a capture must live in the "
                                    "graph's memory", op=op)
        if data.nbytes:
            self.memory.constants.append(data)
            _driver_memory.memcpy_htod_async(dst, data.ctypes.data, data.nbytes,
                                             self.memory.stream, op)

    def refuse(self, op: str) -> None:
        """Abandon the capture and raise the "not allowed during capture" error."""
        if not self.abandoned:
            self.refused = op
        self.abandon(op)
        raise refused(op)

    def abandon(self, reason: str) -> None:
        """End the capture now and discard what it recorded (idempotent)."""
        if self.abandoned:
            return
        self.abandoned = reason
        status, graph = self.finish()
        if graph:
            _driver_graph.lib().cuGraphDestroy(graph)
        self.memory.close()

    def finish(self) -> tuple[int, int]:
        """End capture on the stream and put the context back in eager mode: (CUresult,
        graph handle or 0). Frees asked for during the capture are carried out."""
        ctx = self.ctx
        try:
            status, graph = _driver_graph.end_capture(int(ctx.stream))
        finally:
            ctx.capture = None
            ctx.eager = not ctx.closed
            self._restore_blas()
            after = self.after
            while True:
                try:
                    work = after.pop(0)
                except IndexError:  # (``defer`` may take one back meanwhile)
                    break
                try:
                    work()
                except Exception:  # noqa: BLE001 - orderings are best effort, like eagerly
                    pass
            self.ctx.home.end_graph()
        return status, graph

    def defer(self, work: Any) -> None:
        """Run ``work()`` (stream work on this context's stream that must not be recorded)
        as the capture ends; at once when it has ended meanwhile. Any thread."""
        after = self.after
        after.append(work)
        if self.ctx.capture is not self:  # ended meanwhile: whoever takes it runs it
            try:
                after.remove(work)
            except ValueError:
                return  # the capture's end took it
            work()

    def blas_ready(self, blas: Any, op: str) -> None:
        """Point cuBLAS at a workspace owned by the graph (once per capture)."""
        if self.blas_workspace is None:
            # through the arena: its size rounding and the pool's limit, like any tensor
            self.blas_workspace = self.ctx.home._alloc(blas.workspace_bytes, op)
            blas.use_workspace(self.blas_workspace.ptr, op)

    def _restore_blas(self) -> None:
        if self.blas_workspace is not None and self.ctx._blas is not None:
            try:
                self.ctx._blas.use_workspace(None, "capture")
            except Exception:  # noqa: BLE001 - the eager workspace is set again lazily
                pass
