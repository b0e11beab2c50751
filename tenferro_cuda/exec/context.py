"""``ExecContext``: everything an op needs on one (runtime, thread).

One per runtime and thread, made by ``CudaRuntime.exec_context()`` on the thread's first
session and kept for the thread's life. Its fields are typed and fixed: the stream, the
pool arena (``home``: the residency identity of every buffer made here), the device error
word, the BLAS handles (made on first use), and the bounded caches of prepared launches
and plans. Op families are functions ``op(ctx, ...)`` over it; they reach the device
only through its methods and through ``kernels/launch.py``.

Every method only enqueues on the stream, except ``wait`` (the explicit barrier, for
``synchronize`` and downloads). Nothing here checks the thread or the scope: the session
facade (``exec/entry.py``) does that before an op runs.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from .. import _driver, _driver_fast, _driver_memory
from ..authority import Authority
from ..dtypes import DType
from ..memo import BoundedCache
from ..tensor import Tensor
from . import guard
from .device_errors import ErrorWatch, error_code

if TYPE_CHECKING:
    from ..device_info import AllocationDomainId, CudaDeviceInfo, CudaRuntimeIdentity
    from ..kernels.launch import PreparedLaunch
    from ..memory import DeviceBuffer, MemoryPool, _Arena
    from .blas import Blas
    from .capture import CaptureState
    from .peer import Link

__all__ = ["ExecContext", "Runtime", "BLOCK"]

BLOCK = 256  # threads per block of the 1-D library kernels
LAUNCH_LIMIT = 1024  # prepared launches kept per context
MEMO_LIMIT = 4096  # plans and prepared calls kept per context


class Runtime(Protocol):
    """What an execution context, and the ops over it, use of their runtime: the
    ``runtime.CudaRuntime`` of the device, which lives above the execution core."""

    context: Any  # the primary CUcontext
    context_id: int
    ordinal: int
    device: Any  # the CUdevice
    domain: AllocationDomainId
    identity: CudaRuntimeIdentity
    info: CudaDeviceInfo
    pool: MemoryPool
    resources: BoundedCache
    waiting_functions: set[int]  # kernels that begin with tf::grid_wait (graph_edges.py)
    programmatic_edges: bool  # sm_90 or later: captured graphs get programmatic edges

    def check_alive(self, op: str = "") -> None: ...

    def current(self) -> AbstractContextManager[None]: ...

    def load_module(self, image: bytes, op: str = "", shared: bool = False) -> Any: ...

    def load_compiled(self, compile: Callable[[bool], Any], op: str,
                      expression: str | None = None, shared: bool = False) -> Any: ...

    def function(self, family: str, expression: str,
                 extra_options: tuple[str, ...] = ()) -> Any: ...

    def function_from_source(self, source: str, name: str, expression: str,
                             extra_options: tuple[str, ...] = (), op: str = "",
                             waits: bool = False) -> Any: ...


class ExecContext(Authority):
    """The execution state of one runtime on one thread (see the module docstring)."""

    __slots__ = ("runtime", "thread", "context", "context_id", "ordinal", "domain", "info",
                 "sm_count", "stream", "home", "err_word", "err_host", "errors", "launches", "memo",
                 "dot_slots", "session_open", "pending", "closed", "eager", "capture",
                 "aux_stream", "_blas", "events", "links")

    runtime: Runtime
    info: CudaDeviceInfo
    stream: Any  # the CUstream
    home: _Arena
    err_word: DeviceBuffer

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.thread = threading.get_ident()
        self.context, self.context_id = runtime.context, runtime.context_id
        self.ordinal, self.domain = runtime.ordinal, runtime.domain.value
        self.info = runtime.info
        self.sm_count = runtime.info.multiprocessor_count
        self.err_host = 0
        with guard.within(self.context, self.context_id):
            self.stream = _driver.stream_create()
            try:  # a failure part-way gives back what was already acquired
                self.err_host = _driver_memory.host_alloc_pinned(8)
                self.home = runtime.pool.arena(self.stream)
                self.err_word = self.home.alloc(8, "runtime")
                _driver_memory.memset_d8_async(self.err_word.ptr, 0, 8, self.stream)
            except BaseException:
                if self.err_host:
                    _driver_memory.host_free(self.err_host)
                _driver.stream_destroy(self.stream)
                raise
        self.errors = ErrorWatch()  # whether synchronize must read err_word
        self.launches: BoundedCache = BoundedCache(LAUNCH_LIMIT)
        self.memo: BoundedCache = BoundedCache(MEMO_LIMIT)
        self.dot_slots: dict[int, Any] = {}
        self.session_open = False
        self.pending: list = []  # callables run by flush() (deferred work)
        self.closed = False
        self.eager = True  # open and not capturing: the facade's usual path may run
        self.capture: CaptureState | None = None
        self.aux_stream: Any = None  # made on first use (graph memory)
        self._blas: Blas | None = None
        self.events: list = []  # idle ordering events of this context (_foreign.order)
        self.links: dict[ExecContext, Link] = {}  # copies into other contexts (exec/peer)

    # --- memory --------------------------------------------------------------------------
    def alloc(self, dtype: DType, shape: tuple[int, ...], op: str) -> Tensor:
        """A new compact device tensor (contents undefined)."""
        buf = self.home.alloc(math.prod(shape) * dtype.itemsize, op)
        return Tensor._make(dtype, tuple(shape), buffer=buf)

    def alloc_bytes(self, nbytes: int, op: str) -> DeviceBuffer:
        """A device buffer of at least ``nbytes`` (scratch, workspaces)."""
        return self.home.alloc(nbytes, op)

    def adopt(self, ptr: int, nbytes: int, owner: object) -> DeviceBuffer:
        """A buffer over foreign memory, resident here; ``owner`` keeps it alive."""
        return self.home.adopt(ptr, nbytes, owner)

    # --- stream-ordered copies -------------------------------------------------------------
    def copy(self, dst: int, src: int, nbytes: int, op: str) -> None:
        """Device-to-device copy of ``nbytes`` (addresses)."""
        _driver_memory.memcpy_dtod_async(dst, src, nbytes, self.stream, op)

    def memset(self, dst: int, value: int, nbytes: int, op: str) -> None:
        _driver_memory.memset_d8_async(dst, value, nbytes, self.stream, op)

    def upload(self, dst: int, host: int, nbytes: int, op: str) -> None:
        """Host-to-device copy from a host address (staged by the driver before return)."""
        if self.capture is not None:
            self.capture.refuse(op)
        _driver_memory.memcpy_htod_async(dst, host, nbytes, self.stream, op)

    def download(self, host: int, src: int, nbytes: int, op: str) -> None:
        """Device-to-host copy into a host address; complete after ``wait``."""
        if self.capture is not None:
            self.capture.refuse(op)
        _driver_memory.memcpy_dtoh_async(host, src, nbytes, self.stream, op)

    def wait(self, op: str) -> None:
        """Block the host until the stream is idle (an explicit barrier)."""
        if self.capture is not None:
            self.capture.refuse(op)
        _driver.stream_barrier(self.stream, op)

    def link(self, dst: ExecContext) -> Link:
        """The reusable state of copies from this context into ``dst`` (``exec/peer.py``),
        made on first use; links into contexts closed meanwhile are closed then."""
        link = self.links.get(dst)
        if link is None:
            from .peer import Link

            for other in [c for c in self.links if c.closed]:
                self.links.pop(other).close()
            link = self.links[dst] = Link(self, dst)
        return link

    def pointer_device(self, address: int) -> int:
        """The device ordinal of a device address (BackendSourceError for host memory)."""
        return _driver_fast.pointer_ordinal(address)

    # --- kernels ---------------------------------------------------------------------------
    def function(self, family: str, expression: str) -> Any:
        """The loaded CUfunction of a registered family's instantiation."""
        return self.runtime.function(family, expression)

    def source_function(self, source: str, name: str, expression: str,
                        options: tuple[str, ...] = (), op: str = "",
                        waits: bool = False) -> Any:
        """The loaded CUfunction of ``expression`` in a generated source (fusion: ``waits``,
        its kernel begins with ``tf::grid_wait``; an extension's: not)."""
        return self.runtime.function_from_source(source, name, expression, options, op=op,
                                                 waits=waits)

    def prepare(self, key: Any, fn: Any, codes: str, *, block: tuple[int, int, int] = (
            BLOCK, 1, 1), shared: int = 0, tail: tuple = (), op: str = "") -> PreparedLaunch:
        """The prepared launch cached under ``key`` (made, and its geometry validated, on
        first use; remade when ``key`` was last prepared for another function). A launch
        whose constants carry the error word counts itself in ``errors``."""
        launch = self.launches.get(key)
        if launch is None or launch.fn is not fn:
            from ..kernels.launch import PreparedLaunch, WatchedLaunch

            if self.err_word.ptr in tail:
                launch = WatchedLaunch(fn, codes, self.stream, self.info, self.errors,
                                       block=block, shared=shared, tail=tail, op=op)
            else:
                launch = PreparedLaunch(fn, codes, self.stream, self.info, block=block,
                                        shared=shared, tail=tail, op=op)
            self.launches.put(key, launch)
        return launch

    def launch(self, fn: Any, codes: str, grid: tuple[int, int, int], args: tuple, op: str,
               block: tuple[int, int, int] = (BLOCK, 1, 1), shared: int = 0) -> None:
        """Launch ``fn`` once with every parameter given (the general, non-hot path)."""
        self.prepare((codes, block, shared, id(fn)), fn, codes, block=block, shared=shared,
                     op=op).run3(grid, *args)

    def grid(self, n: int, block: int = BLOCK, per_thread: int = 1) -> int:
        """Blocks for a grid-stride loop over ``n`` items: enough to fill the device."""
        need = -(-n // (block * per_thread))
        return max(1, min(need, self.sm_count * 16))

    def function_registers(self, fn: Any) -> int:
        return _driver.function_attributes(fn)["registers"]

    def error_code(self, op: str, reason: str) -> int:
        """The code a kernel writes to the error word for ``reason`` in ``op``."""
        return error_code(op, reason)

    # --- libraries and deferred work ---------------------------------------------------------
    def blas(self, op: str) -> Blas:
        """This context's cuBLAS (handle bound to the stream), made on first use."""
        blas = self._blas
        if blas is None:
            from .blas import Blas

            blas = self._blas = Blas(self, op)
        if self.capture is not None:
            self.capture.blas_ready(blas, op)
        return blas

    def flush(self) -> None:
        """Run deferred work so that everything asked for so far is enqueued."""
        pending = self.pending
        while pending:
            pending.pop(0)()

    def close(self) -> None:
        """Release the stream and what lives on it (the runtime calls this, synchronized,
        with its context current)."""
        self.closed = True
        self.eager = False
        if self.capture is not None:
            self.capture.abandon("close")
        if self._blas is not None:
            self._blas.close()
        self.err_word.release()
        for event in self.events:
            _driver.event_destroy(event)
        self.events.clear()
        for link in self.links.values():
            link.close()
        self.links.clear()
        _driver_memory.host_free(self.err_host)
        _driver.stream_destroy(self.stream)
        if self.aux_stream is not None:
            _driver.stream_destroy(self.aux_stream)

    def auxiliary_stream(self) -> Any:
        """A second stream of this context, never captured (graph memory is allocated on
        it); made on first use."""
        if self.aux_stream is None:
            self.aux_stream = _driver.stream_create()
        return self.aux_stream

    def __repr__(self) -> str:
        return f"<ExecContext device={self.ordinal} thread={self.thread}>"
