"""``CudaRuntime``: one per device ordinal per process, created lazily by the first
session for that device (never at import).

A runtime retains the device's primary context, captures ``CudaDeviceInfo``, mints a
fresh ``CudaRuntimeIdentity`` and ``AllocationDomainId``, and owns the memory pool, the
loaded kernel modules and one ``ExecContext`` per thread (``exec/context.py``: a
non-blocking stream, the deferred device-error word, the caches of prepared launches). A
sticky CUDA error poisons the runtime: every later call raises ``ContextLostError`` at
once. Whenever the runtime itself needs its context current (creating a stream, loading a
module), it goes through the context guard (``exec/guard.py``), which puts the caller's
context back.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from . import _driver
from .authority import Authority
from .device_info import AllocationDomainId, CudaDeviceInfo, CudaRuntimeIdentity, read_info
from .errors import BackendSourceError, ContextLostError, CudaDeviceError, RuntimeStateError
from .exec import guard
from .exec.context import ExecContext
from .exec.device_errors import error_code, error_message
from .kernels import warmup
from .kernels.compiler import compile_cached, compile_family, shared_cache
from .memo import BoundedCache
from .memory import MemoryPool

__all__ = ["CudaRuntime", "CudaDeviceInfo", "CudaRuntimeIdentity", "AllocationDomainId",
           "GpuExtensionCapability", "Capability", "error_code", "error_message"]


log = logging.getLogger("tenferro_cuda")
# CUresults of an image the driver refuses or a name it lacks (INVALID_IMAGE,
# NO_BINARY_FOR_GPU, INVALID_PTX, UNSUPPORTED_PTX_VERSION, NOT_FOUND): ``load_compiled``
# compiles such a program again, once
_IMAGE_CODES = frozenset((200, 209, 218, 222, 500))


class GpuExtensionCapability(enum.Enum):
    """What a session can do (the spec's GpuExtensionCapability, plus our own)."""

    RAW_MODULE = "raw_module"
    RUNTIME_COMPILATION = "runtime_compilation"
    KERNEL_SESSION = "kernel_session"
    RAW_STREAM = "raw_stream"
    SAME_DEVICE_ASYNC_COPY = "same_device_async_copy"
    PEER_COPY = "peer_copy"
    BF16_ARITHMETIC = "bf16_arithmetic"
    STREAM_ORDERED_MEMORY = "stream_ordered_memory"
    CUBLAS = "cublas"
    COLLECTIVES = "collectives"  # NCCL loads: tenferro_cuda.Communicator works


Capability = GpuExtensionCapability  # the short name, kept as an alias


RESOURCE_LIMIT = 256  # extension resources kept per runtime
_serials = itertools.count(1)


class CudaRuntime(Authority):
    """The per-device runtime. Use ``CudaRuntime.get(ordinal)``; sessions do this."""

    _registry: dict[int, CudaRuntime] = {}
    _registry_lock = threading.Lock()

    def __init__(self, ordinal: int, *, _token: object = None) -> None:
        if _token is not _TOKEN:
            raise TypeError("CudaRuntime is created by sessions; use CudaRuntime.get(ordinal)")
        warmup.start()  # the first kernel's host work, while the driver starts below
        count = _driver.device_count()
        if not 0 <= ordinal < count:
            raise CudaDeviceError(f"no CUDA device {ordinal} ({count} present)", op="runtime")
        self.ordinal = ordinal
        self.pid = os.getpid()
        self.device = _driver.device(ordinal)
        self.info = read_info(ordinal, self.device)
        self.context = _driver.primary_ctx_retain(self.device)
        self.context_id = int(self.context)
        serial = next(_serials)
        self.identity = CudaRuntimeIdentity(ordinal, self.info.uuid, serial, self.pid)
        self.domain = AllocationDomainId(serial)
        self.cache = shared_cache()
        self._lock = threading.RLock()
        self._tls = threading.local()
        self._contexts: list[ExecContext] = []
        self._functions: dict[tuple[str, str, tuple[str, ...]], Any] = {}
        # The handles (ints) of the loaded functions whose kernels begin with
        # tf::grid_wait (the families' and fusion's, never a user's): in a captured graph
        # the edges into them may be programmatic, on sm_90 and later (graph_edges.py).
        self.waiting_functions: set[int] = set()
        self.programmatic_edges = self.info.compute_capability >= (9, 0)
        self._modules: list[object] = []
        self._images: dict[bytes, object] = {}  # sha256 of an image -> its module (raw)
        self.resources: BoundedCache = BoundedCache(RESOURCE_LIMIT)  # RawSession.resource
        self.closed = False
        with self.current():
            self.pool = MemoryPool(ordinal, self.context, serial, enter=self.current)

    @classmethod
    def get(cls, ordinal: int = 0) -> CudaRuntime:
        """The process-wide runtime of device ``ordinal`` (created on first use)."""
        if _forked_from is not None:
            raise RuntimeStateError(
                f"CUDA was initialised in process {_forked_from} before fork(); this child "
                "process cannot use it. Start CUDA work after fork only in processes that "
                "never initialised it (multiprocessing 'spawn' or 'forkserver')",
                op="cuda_exec_session")
        rt = cls._registry.get(ordinal)
        if rt is not None and not rt.closed:
            return rt
        with cls._registry_lock:
            rt = cls._registry.get(ordinal)
            if rt is None or rt.closed:
                rt = cls(ordinal, _token=_TOKEN)
                cls._registry[ordinal] = rt
            return rt

    @classmethod
    def create_separate(cls, ordinal: int = 0) -> CudaRuntime:
        """A second, independent runtime on the same device (its own allocation domain).
        Meant for tests and tools; tensors never cross between runtimes."""
        return cls(ordinal, _token=_TOKEN)

    # --- state checks ------------------------------------------------------------------
    def check_alive(self, op: str = "") -> None:
        # (a forked child's runtimes are closed by the fork hook below, so the process id
        # is asked only on the way to an error)
        if self.closed:
            if os.getpid() != self.pid:
                raise RuntimeStateError(
                    f"the runtime of device {self.ordinal} was initialised in process "
                    f"{self.pid} and cannot be used after fork(); start CUDA work in the "
                    f"child instead", op=op)
            raise RuntimeStateError(f"the runtime of device {self.ordinal} is closed", op=op)
        if self.context_id in _driver.lost_contexts:
            raise ContextLostError(
                f"CUDA device {self.ordinal}: {_driver.LOST_MESSAGE}", op=op)

    def current(self):
        """A context manager making this runtime's context current for a block (the
        caller's context is put back after it)."""
        return guard.within(self.context, self.context_id)

    def exec_context(self) -> ExecContext:
        """This thread's execution context (made on first use: stream, error word)."""
        ctx = getattr(self._tls, "ctx", None)
        if ctx is None:
            self.check_alive("exec_context")
            ctx = ExecContext(self)
            self._tls.ctx = ctx
            with self._lock:
                self._contexts.append(ctx)
        return ctx

    # --- kernels -----------------------------------------------------------------------
    def load_module(self, image: bytes, op: str = "", shared: bool = False):
        """Load a cubin/PTX image into the primary context. ``shared``: an image loaded
        before this way (the same bytes) gives the module loaded then -- a raw body that
        compiles its source on every call loads it once (modules are unloaded with the
        runtime); without it every call loads a module of its own (its globals too)."""
        if not shared:
            with self.current():
                return self._load_module(image, op)
        digest = hashlib.sha256(image).digest()
        module = self._images.get(digest)
        if module is None:
            with self.current():
                module = self._load_module(image, op)
            with self._lock:
                module = self._images.setdefault(digest, module)
        return module

    def _load_module(self, image: bytes, op: str):
        """``load_module`` with this runtime's context current already."""
        module = _driver.module_load_data(image, op)
        with self._lock:
            self._modules.append(module)
        return module

    def function(self, family: str, expression: str, extra_options: tuple[str, ...] = ()):
        """The CUfunction of a registered family's instantiation (compiled, cached)."""
        key = (family, expression, extra_options)
        fn = self._functions.get(key)
        if fn is not None:
            return fn
        with self._lock:
            fn = self._functions.get(key)
            if fn is None:
                fn = self.load_compiled(
                    lambda fresh: compile_family(family, (expression,), self.info.arch,
                                                 fresh=fresh), family, expression)
                self.waiting_functions.add(int(fn))  # (every family kernel waits)
                self._functions[key] = fn
        return fn

    def function_from_source(self, source: str, name: str, expression: str,
                             extra_options: tuple[str, ...] = (), op: str = "",
                             waits: bool = False):
        """The CUfunction of ``expression`` in a generated source (fusion, extensions).
        ``waits``: the library generated the source, and its kernel begins with
        ``tf::grid_wait`` (``waiting_functions``)."""
        key = ("<source>", source, (expression, *extra_options))
        fn = self._functions.get(key)
        if fn is None:
            with self._lock:
                fn = self._functions.get(key)  # another thread may have loaded it meanwhile
                if fn is None:
                    fn = self.load_compiled(
                        lambda fresh: compile_cached(source, name, (expression,),
                                                     self.info.arch, extra_options, op=op,
                                                     fresh=fresh), op, expression)
                    self._functions[key] = fn
        if waits:
            self.waiting_functions.add(int(fn))
        return fn

    def load_compiled(self, compile: Callable[[bool], Any], op: str,
                      expression: str | None = None, shared: bool = False):
        """Load the program ``compile(fresh)`` gives: its module (``load_module``), or with
        ``expression`` that function of it. An image the driver refuses, or one without
        the function, is compiled again without the kernel cache (``fresh=True``, which
        replaces the entry) and loaded once more: a cache entry whose checksum and key are
        right but whose image is not reads as a miss, like any other bad entry."""
        try:
            return self._load_program(compile(False), op, expression, shared)
        except BackendSourceError as exc:
            if getattr(exc.__cause__, "code", None) not in _IMAGE_CODES:
                raise
            log.warning("a compiled kernel image for %s did not load (%s); compiling it "
                        "again without the kernel cache", op, exc.__cause__)
        return self._load_program(compile(True), op, expression, shared)

    def _load_program(self, prog, op: str, expression: str | None, shared: bool):
        if expression is None:
            return self.load_module(prog.image, op, shared)
        with self.current():
            module = self._load_module(prog.image, op)
            try:
                return _driver.module_get_function(module, prog.lowered[expression], op)
            except BaseException:  # a module without the function is of no use: unloaded
                with self._lock:
                    self._modules.remove(module)
                _driver.module_unload(module)
                raise

    # --- lifetime ----------------------------------------------------------------------
    def synchronize_all(self) -> None:
        """Wait for every context's stream, except one being captured (a synchronize would
        break another thread's capture; its frees wait for the capture's end anyway)."""
        with self._lock:
            contexts = list(self._contexts)
        for ctx in contexts:
            if ctx.capture is None:
                _driver.stream_synchronize(ctx.stream)

    def release_cached_memory(self) -> None:
        """Wait for pending frees on every stream, then return cached pool memory."""
        self.check_alive("release_cached_memory")
        with self.current():
            self.pool.drain()  # recycled buffers: frees enqueued on their streams
            self.synchronize_all()  # ... and completed, so that the trim returns them
            self.pool.trim(0)

    def close(self) -> None:
        """Release everything this runtime holds (sessions must be closed), then run the
        close hooks (``install_close_hook``)."""
        if self.closed:
            return
        self.closed = True
        for ctx in list(self._contexts):  # the usual paths (eager) end here, failure or not
            ctx.eager = False
        try:
            with self.current():
                for ctx in list(self._contexts):  # no stream is captured while it closes:
                    if ctx.capture is not None:  # every stream is then waited for
                        ctx.capture.abandon("the runtime's close")
                        ctx.eager = False  # (the abandon put it back)
                self.synchronize_all()
                for ctx in self._contexts:
                    ctx.close()
                for module in self._modules:
                    _driver.module_unload(module)
                self.pool.close()
        finally:
            _driver.primary_ctx_release(self.device)
            with CudaRuntime._registry_lock:
                if CudaRuntime._registry.get(self.ordinal) is self:
                    del CudaRuntime._registry[self.ordinal]
        for fn in list(_close_hooks):
            fn()

    def __repr__(self) -> str:
        return (f"CudaRuntime(device={self.ordinal}, {self.info.name!r}, "
                f"serial={self.identity.serial})")


# run after a runtime has closed, e.g. the release of foreign arrays that waited for one
# of its streams (``_foreign``, which sits above this module); each hook never raises
_close_hooks: list[Callable[[], None]] = []


def install_close_hook(fn: Callable[[], None]) -> None:
    """Call ``fn()`` after each runtime's close (once per function)."""
    if fn not in _close_hooks:
        _close_hooks.append(fn)


_TOKEN = object()
_forked_from: int | None = None


def _after_fork_in_child() -> None:
    """A forked child inherits no usable CUDA state: close every runtime without
    touching the driver, so that each later call raises a clear RuntimeStateError."""
    global _forked_from
    parent = None
    for rt in list(CudaRuntime._registry.values()):
        parent = rt.pid
        rt.closed = True
        rt.pool.closed = True
        for ctx in rt._contexts:
            # eager off too: the driver's per-thread current context is copied into the
            # child, so the facade's usual path (which compares it) would still run
            ctx.closed, ctx.eager = True, False
    if parent is not None:
        _forked_from = parent


os.register_at_fork(after_in_child=_after_fork_in_child)
