"""Test doubles for the dot family's CPU tests (tests/cpu/test_dot_ops.py and
test_dot_args.py; kept here because tests/gpu is on sys.path): an execution context
(``reference.fake_context.FakeContext``) whose device work is recorded instead of run --
addresses without memory, every allocation, copy, memset, upload and launch appended to
``ctx.calls`` -- a recording stand-in for ``exec.blas.Blas``, and a recording stand-in for
the cuBLAS bindings module (under a real ``Blas``, ``Rec(real_blas=True)``), and pinned
host memory for the real ``Blas``'s pointer staging (``PinnedStub``)."""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np
from reference.fake_context import FakeContext, FakeSession

from tenferro_cuda.configs.dot import DotGeneralConfig
from tenferro_cuda.dtypes import DType
from tenferro_cuda.exec import blas_groups
from tenferro_cuda.exec.blas import Blas
from tenferro_cuda.ops import dot
from tenferro_cuda.tensor import Tensor

MM = DotGeneralConfig((1,), (0,))
BMM = DotGeneralConfig((2,), (1,), (0,), (0,))
LIVE_BLAS: list = []  # real Blas objects made by Rec contexts (fixtures close them)


class AddressSpace:
    """Device addresses without memory: each allocation gets its own aligned range."""

    def __init__(self) -> None:
        self.next = 0x10000

    def alloc(self, nbytes: int) -> int:
        if nbytes <= 0:
            return 0
        ptr = self.next
        self.next += -(-nbytes // 0x10000) * 0x10000 + 0x10000
        return ptr

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        pass

    def memset(self, dst: int, value: int, nbytes: int) -> None:
        pass


class _Call:
    """A bound call of ``RecordingBlas.bind``."""

    def __init__(self, calls: list, plan: Any, precision: str) -> None:
        self.calls, self.plan, self.precision = calls, plan, precision

    def run(self, pa: int, pb: int, pc: int, alpha: Any, beta: Any, op: str) -> None:
        self.calls.append(("call", self.plan, alpha, beta, self.precision, (pa, pb, pc)))


class _Grouped:
    """A bound call of ``RecordingBlas.pointer_call``."""

    def __init__(self, calls: list, keys: list, sizes: list, dtype: Any, precision: str):
        self.calls, self.keys, self.sizes = calls, keys, sizes
        self.dtype, self.precision = dtype, precision

    def run(self, pointers: int, op: str) -> None:
        self.calls.append(("grouped", self.keys, self.sizes, self.dtype, self.precision,
                           pointers))


class RecordingBlas:
    """Stands in for ``exec.blas.Blas``: records gemm, bind (and the bound calls' runs),
    pointer-array uploads and the runs of grouped calls."""

    def __init__(self, calls: list) -> None:
        self.calls = calls
        self.grouped_available = True

    def has_grouped(self) -> bool:
        return self.grouped_available

    def gemm(self, plan, a, b, c, dtype, alpha, beta, precision, op) -> None:
        self.calls.append(("gemm", plan, alpha, beta, precision, (a, b, c)))

    def bind(self, plan, dtype, precision) -> _Call:
        self.calls.append(("bind", plan))
        return _Call(self.calls, plan, precision)

    def pointer_call(self, keys, sizes, dtype, precision) -> _Grouped:
        return _Grouped(self.calls, list(keys), list(sizes), dtype, precision)

    def upload_pointers(self, ctx, dst, data, op) -> None:
        self.calls.append(("upload", dst, np.array(data, np.int64)))


class Rec(FakeContext):
    """A context whose device work is recorded in ``calls`` (see the module docstring).
    ``blas_asked`` counts ``blas(op)`` calls; with ``real_blas`` the first one makes a
    real ``exec.blas.Blas`` (over whatever cuBLAS module the test installed)."""

    def __init__(self, real_blas: bool = False) -> None:
        self.calls: list = []
        super().__init__(AddressSpace(), self._launched)
        self.real_blas = real_blas
        self.blas_impl = None if real_blas else RecordingBlas(self.calls)
        self.blas_asked = 0
        self.stream = 0

    def dev(self, shape, dtype: DType = DType.FLOAT32) -> Tensor:
        """A resident device tensor (not recorded)."""
        buf = self.home.alloc(math.prod(shape) * dtype.itemsize)
        return Tensor._make(dtype, tuple(shape), buffer=buf)

    def alloc(self, dtype, shape, op):
        self.calls.append(("alloc", tuple(shape)))
        return super().alloc(dtype, shape, op)

    def alloc_bytes(self, nbytes, op):
        self.calls.append(("alloc_bytes", nbytes))
        return super().alloc_bytes(nbytes, op)

    def copy(self, dst, src, nbytes, op) -> None:
        self.calls.append(("copy", dst, src, nbytes))

    def memset(self, dst, value, nbytes, op) -> None:
        self.calls.append(("memset", dst, value, nbytes))

    def upload(self, dst, host, nbytes, op) -> None:
        data = np.frombuffer(ctypes.string_at(host, nbytes), np.int64).copy()
        self.calls.append(("upload", dst, data, host))

    def _launched(self, fn, grid, block, shared, args) -> None:
        self.calls.append(("launch", fn, tuple(grid), tuple(block), tuple(args)))

    def blas(self, op):
        self.blas_asked += 1
        if self.blas_impl is None:
            self.blas_impl = Blas(self, op)
            LIVE_BLAS.append(self.blas_impl)
        return self.blas_impl


def session(ctx: Any) -> Any:
    """The dot family's functions bound to ``ctx`` under their session method names."""
    return FakeSession(ctx, dot.METHODS)


def kinds(calls: list) -> list[str]:
    return [c[0] for c in calls]


def is_copy(call: tuple) -> bool:
    """A staging copy: a cuMemcpy or a launch of the storage family's copy kernels."""
    return call[0] == "copy" or (call[0] == "launch" and str(call[1]).startswith(
        ("tf::permute", "tf::strided_copy")))


class FakeLib:
    """Stands in for nvmath.bindings.cublas: records every call."""

    def __init__(self) -> None:
        self.calls: list = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def fn(*args):
            self.calls.append((name, args))
            return 0x5151 if name == "create" else None
        return fn


def close_live_blas() -> None:
    """Destroy the handles of the real Blas objects made so far (while the fake cuBLAS
    module is still installed)."""
    while LIVE_BLAS:
        LIVE_BLAS.pop().close()


class PinnedStub:
    """Page-locked host memory for ``exec.blas_groups.PinnedRing`` without a driver:
    ctypes buffers (real host addresses), frees counted, and a stream that is idle unless
    ``busy`` is set (``install(monkeypatch)`` puts it in place)."""

    def __init__(self) -> None:
        self.blocks: list = []
        self.freed: list[int] = []
        self.busy = False
        self.queries = 0

    def alloc(self, nbytes: int) -> int:
        buf = ctypes.create_string_buffer(nbytes)
        self.blocks.append(buf)
        return ctypes.addressof(buf)

    def free(self, ptr: int) -> int:
        self.freed.append(ptr)
        return 0

    def query(self, stream: Any) -> bool:
        self.queries += 1
        return not self.busy

    def install(self, monkeypatch: Any) -> PinnedStub:
        monkeypatch.setattr(blas_groups._driver_memory, "host_alloc_pinned", self.alloc)
        monkeypatch.setattr(blas_groups._driver_memory, "host_free", self.free)
        monkeypatch.setattr(blas_groups._driver, "stream_query", self.query)
        return self


class Capture:
    """Records the ``_cublas`` calls; host arrays and scalars are read during the call
    (``grouped``: the per-group int32 parameters and float scalars of gemm_grouped)."""

    def __init__(self):
        self.calls = []
        self.grouped: dict = {}

    def __call__(self, name):
        def record(*args, **kwargs):
            if name == "gemm_grouped":
                groups = args[15]

                def ints(i):
                    return list((ctypes.c_int32 * groups).from_address(args[i]))
                self.grouped = {key: ints(i) for key, i in (
                    ("ta", 1), ("tb", 2), ("m", 3), ("n", 4), ("k", 5), ("lda", 9),
                    ("ldb", 11), ("ldc", 14), ("sizes", 16))}
                self.scalars = [list((ctypes.c_float * groups).from_address(args[i]))
                                for i in (6, 12)]
            if name in ("gemm", "gemm_strided_batched", "gemm_batched"):  # reused blocks
                self.scalar_bytes = ctypes.string_at(args[6], 32)
            self.calls.append((name, args))
        return record
