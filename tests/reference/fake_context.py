"""A stand-in for ``ExecContext`` on machines without a GPU: the op families run
unchanged over it, with memory and kernels emulated on the host.

``FakeContext(memory, launcher)`` has the fields and methods the families use
(``exec/context.py``): ``alloc``/``alloc_bytes``/``adopt`` take addresses from
``memory.alloc(nbytes) -> int``; ``copy``/``memset``/``upload``/``download`` call
``memory.copy(dst, src, n)`` and ``memory.memset(dst, value, n)``; ``function`` returns
the name expression itself; ``prepare`` and ``launch`` hand every launch to
``launcher(expression, grid, block, shared, args)`` (the head values followed by the
constant tail), so a test can run an emulated kernel or record the call. With
``real_launches=True`` the library's own ``PreparedLaunch`` objects are used instead (the
test then replaces ``tenferro_cuda.kernels.launch._launch``, which receives the packed
parameter block exactly as ``cuLaunchKernel`` would). ``HostMemory``
is the memory model with real host addresses (ctypes can read and write them).

``FakeSession(ctx, *tables)`` exposes the functions of the given family ``METHODS``
tables (default: every family's) by their session method names, bound to ``ctx`` (no
thread/scope/context checks: those belong to the real facade).
"""

from __future__ import annotations

import ctypes
import math
from types import SimpleNamespace
from typing import Any

import numpy as np

from tenferro_cuda.exec.device_errors import ErrorWatch
from tenferro_cuda.memo import BoundedCache
from tenferro_cuda.tensor import Tensor

__all__ = ["FakeContext", "FakeSession", "HostMemory", "FakeBuffer", "INFO", "host_upload",
           "host_download"]

INFO = dict(multiprocessor_count=132, arch=90, l2_cache_bytes=60 << 20,
            compute_capability=(9, 0), max_threads_per_block=1024,
            max_block_dims=(1024, 1024, 64), max_grid_dims=((1 << 31) - 1, 65535, 65535),
            max_shared_per_block=227 << 10, memory_pools_supported=True)


class HostMemory:
    """Host allocations with real addresses (aligned to ``align`` bytes)."""

    def __init__(self, align: int = 256) -> None:
        self.align = align
        self.blocks: list[np.ndarray] = []

    def alloc(self, nbytes: int) -> int:
        if nbytes <= 0:
            return 0
        raw = np.zeros(nbytes + 2 * self.align, np.uint8)
        raw[:] = 0xA5  # garbage, like fresh device memory
        self.blocks.append(raw)
        return (raw.ctypes.data + self.align - 1) // self.align * self.align

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        ctypes.memmove(dst, src, nbytes)

    def memset(self, dst: int, value: int, nbytes: int) -> None:
        ctypes.memset(dst, value, nbytes)


def host_upload(ctx: Any, array: np.ndarray) -> Tensor:
    """A compact tensor of ``ctx`` (a FakeContext over ``HostMemory``) holding ``array``."""
    array = np.array(array, order="C")  # (ascontiguousarray would make rank 0 rank 1)
    from tenferro_cuda.dtypes import DType

    t = ctx.alloc(DType.of(array.dtype), tuple(array.shape), "upload")
    if array.nbytes:
        ctypes.memmove(t.buffer.ptr, array.ctypes.data, array.nbytes)
    return t


def host_download(t: Any) -> np.ndarray:
    """The elements of a tensor or view over ``HostMemory``, as numpy."""
    buf = t.base.buffer if hasattr(t, "base") else t.buffer
    raw = (ctypes.c_uint8 * max(buf.nbytes, 1)).from_address(buf.ptr)
    flat = np.frombuffer(raw, np.uint8, buf.nbytes).view(t.dtype.numpy)
    index = np.full(t.shape, getattr(t, "offset", 0), np.int64)
    for axis, (n, step) in enumerate(zip(t.shape, t.strides)):
        index = index + (np.arange(n) * step).reshape([-1 if a == axis else 1
                                                       for a in range(t.ndim)])
    return np.array(flat[index])  # (a copy; rank 0 stays an array)


class _Home:
    """The arena of the fake context: the residency identity and the allocator."""

    def __init__(self, memory: Any) -> None:
        self.memory = memory
        self.allocations = 0

    def alloc(self, nbytes: int, op: str = "") -> FakeBuffer:
        self.allocations += 1
        return FakeBuffer(self.memory.alloc(nbytes), nbytes, self)

    def adopt(self, ptr: int, nbytes: int, owner: object) -> FakeBuffer:
        return FakeBuffer(ptr, nbytes, self, owner)


class FakeBuffer:
    """A DeviceBuffer look-alike (``home`` None once released)."""

    def __init__(self, ptr: int, nbytes: int, home: _Home, owner: object = None) -> None:
        self.ptr, self.nbytes, self.home, self.origin, self.owner = ptr, nbytes, home, home, owner
        self.domain, self.ordinal, self.stream = 7, 0, None

    @property
    def freed(self) -> bool:
        return self.home is None

    @property
    def pooled(self) -> bool:
        return self.owner is None

    def release(self) -> None:
        self.home = None


class _Launch:
    def __init__(self, ctx: FakeContext, fn: Any, codes: str, block, shared: int, tail,
                 op: str) -> None:
        self.ctx, self.fn, self.codes, self.block = ctx, fn, codes, block
        self.shared, self.tail, self.op = shared, tuple(tail), op

    def run(self, gx: int, *head: Any) -> None:
        self.ctx.launcher(self.fn, (gx, 1, 1), self.block, self.shared, head + self.tail)

    def pack(self, *head: Any) -> None:
        self.head = head

    def bound(self, gx: int):
        """``PreparedLaunch.bound``: the launch of what ``pack`` wrote last."""
        return lambda: self.run(gx, *self.head)

    def failed(self, exc: BaseException):
        raise exc

    def run3(self, grid, *head: Any) -> None:
        self.ctx.launcher(self.fn, tuple(grid), self.block, self.shared, head + self.tail)

    def put_tail(self, j: int, value: Any) -> None:
        self.tail = self.tail[:j] + (value,) + self.tail[j + 1:]


class FakeContext:
    """An ExecContext look-alike over emulated memory and kernels."""

    def __init__(self, memory: Any, launcher: Any, real_launches: bool = False,
                 **info: Any) -> None:
        self.memory, self.launcher, self.real_launches = memory, launcher, real_launches
        self.home = _Home(memory)
        self.info = SimpleNamespace(**{**INFO, **info})
        self.sm_count = self.info.multiprocessor_count
        self.runtime = SimpleNamespace(identity=SimpleNamespace(serial=-1))
        self.ordinal, self.domain, self.stream = 0, 7, None
        self.context = self.context_id = 0
        self.thread = 0
        self.memo = BoundedCache(4096)
        self.launches = BoundedCache(1024)
        self.dot_slots: dict = {}
        self.err_word = self.home.alloc(8)
        self.errors = ErrorWatch()
        self.pending: list = []
        self.closed = False
        self.eager = True  # as ExecContext: open and not capturing (the facade checks it)
        self.capture = None
        self.blas_impl: Any = None
        self.registers = 32

    def alloc(self, dtype, shape, op: str) -> Tensor:
        buf = self.home.alloc(math.prod(shape) * dtype.itemsize, op)
        return Tensor._make(dtype, tuple(shape), buffer=buf)

    def pointer_device(self, address: int) -> int:
        """As an ExecContext's: every address is taken for this device's memory (a test
        that needs the driver's refusal replaces this)."""
        return 0

    def alloc_bytes(self, nbytes: int, op: str) -> FakeBuffer:
        return self.home.alloc(nbytes, op)

    def adopt(self, ptr: int, nbytes: int, owner: object) -> FakeBuffer:
        return self.home.adopt(ptr, nbytes, owner)

    def copy(self, dst: int, src: int, nbytes: int, op: str) -> None:
        self.memory.copy(dst, src, nbytes)

    def memset(self, dst: int, value: int, nbytes: int, op: str) -> None:
        self.memory.memset(dst, value, nbytes)

    def upload(self, dst: int, host: int, nbytes: int, op: str) -> None:
        self.memory.copy(dst, host, nbytes)

    def download(self, host: int, src: int, nbytes: int, op: str) -> None:
        self.memory.copy(host, src, nbytes)

    def wait(self, op: str) -> None:
        pass

    def function(self, family: str, expression: str) -> str:
        return expression

    def source_function(self, source, name, expression, options=(), op="", waits=False):
        return expression

    def prepare(self, key, fn, codes, *, block=(256, 1, 1), shared=0, tail=(), op=""):
        if self.real_launches:  # the library's own PreparedLaunch (patch its _launch)
            from tenferro_cuda.kernels.launch import PreparedLaunch

            launch = self.launches.get(key)
            if launch is None or launch.fn is not fn:
                launch = self.launches.put(key, PreparedLaunch(
                    fn, codes, self.stream, self.info, block=block, shared=shared,
                    tail=tail, op=op))
            return launch
        return _Launch(self, fn, codes, block, shared, tail, op)

    def launch(self, fn, codes, grid, args, op, block=(256, 1, 1), shared=0) -> None:
        if self.real_launches:
            self.prepare((codes, block, shared, fn), fn, codes, block=block, shared=shared,
                         op=op).run3(grid, *args)
            return
        self.launcher(fn, tuple(grid), block, shared, tuple(args))

    def grid(self, n: int, block: int = 256, per_thread: int = 1) -> int:
        need = -(-n // (block * per_thread))
        return max(1, min(need, self.sm_count * 16))

    def function_registers(self, fn) -> int:
        return self.registers

    def error_code(self, op: str, reason: str) -> int:
        from tenferro_cuda.runtime import error_code

        return error_code(op, reason)

    def blas(self, op: str):
        return self.blas_impl

    def flush(self) -> None:
        pass


class FakeSession:
    """Every family function, bound to ``ctx``, under its session method name."""

    def __init__(self, ctx: Any, *tables: Any) -> None:
        """``tables``: family ``METHODS`` tables (default: every family's)."""
        if not tables:
            from tenferro_cuda._session_ops import TABLES

            tables = tuple(table for _, table in TABLES)
        self.ctx = ctx
        self._methods = {name: fn for table in tables for name, fn in table}

    def __getattr__(self, name: str):
        try:
            fn = self.__dict__["_methods"][name]
        except KeyError:
            raise AttributeError(name) from None
        ctx = self.__dict__["ctx"]
        return lambda *args, **kwargs: fn(ctx, *args, **kwargs)
