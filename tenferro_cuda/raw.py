"""``RawSession``: the extension author's view of the session (DESIGN 3.1).

Everything a raw session lends (the stream handle, modules, functions) is valid only
inside its ``with_raw``/``raw`` scope; afterwards every use raises RuntimeStateError.
Launch geometry and shared memory are validated against the device limits before any
launch. Nothing here synchronizes except ``download_tensor``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _driver
from .dtypes import DType, as_dtype
from .errors import RuntimeStateError, ValidationError
from .kernels.args import ArgPack
from .kernels.compiler import compile_cached
from .tensor import Tensor, _Strided

__all__ = ["RawSession", "LaunchConfig", "KernelArg", "StreamHandle", "Module", "Function",
           "DevicePointer"]


def _dim3(value, name: str) -> tuple[int, int, int]:
    if isinstance(value, int):
        value = (value,)
    dims = tuple(int(v) for v in value) + (1,) * (3 - len(tuple(value)))
    if len(dims) != 3 or any(d < 1 for d in dims):
        raise ValidationError(f"{name} must be up to three ints >= 1 (got {tuple(value)})",
                              op="LaunchConfig")
    return dims  # type: ignore[return-value]


@dataclass(frozen=True)
class LaunchConfig:
    """Grid and block dimensions and dynamic shared memory bytes, validated."""

    grid: tuple[int, int, int] | int
    block: tuple[int, int, int] | int
    shared_bytes: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "grid", _dim3(self.grid, "grid"))
        object.__setattr__(self, "block", _dim3(self.block, "block"))
        if self.shared_bytes < 0:
            raise ValidationError(f"shared_bytes must be >= 0 (got {self.shared_bytes})",
                                  op="LaunchConfig")


@dataclass(frozen=True)
class KernelArg:
    """One kernel parameter: packed bytes and their alignment."""

    data: bytes
    align: int
    code: str = ""  # the ArgPack code, derived

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", ("X" if self.align >= 16 else "S") + str(len(self.data)))

    @staticmethod
    def i32(v: int) -> KernelArg:
        return KernelArg(struct.pack("<i", v), 4)

    @staticmethod
    def u32(v: int) -> KernelArg:
        return KernelArg(struct.pack("<I", v), 4)

    @staticmethod
    def i64(v: int) -> KernelArg:
        return KernelArg(struct.pack("<q", v), 8)

    @staticmethod
    def u64(v: int) -> KernelArg:
        return KernelArg(struct.pack("<Q", v), 8)

    @staticmethod
    def f32(v: float) -> KernelArg:
        return KernelArg(struct.pack("<f", v), 4)

    @staticmethod
    def f64(v: float) -> KernelArg:
        return KernelArg(struct.pack("<d", v), 8)

    @staticmethod
    def pointer(p: int | DevicePointer) -> KernelArg:
        return KernelArg(struct.pack("<Q", int(p)), 8)

    @staticmethod
    def raw(data: bytes, align: int = 8) -> KernelArg:
        """Any by-value struct, given as its bytes."""
        return KernelArg(bytes(data), align)


@dataclass(frozen=True)
class DevicePointer:
    """A residency-checked device address and the byte span behind it."""

    address: int
    nbytes: int
    writable: bool

    def __int__(self) -> int:
        return self.address


class _Lent:
    __slots__ = ("_scope", "_what")
    _scope: Any
    _what: str

    def _check(self) -> None:
        if not self._scope.alive:
            raise RuntimeStateError(f"this {self._what} was lent by a raw session whose "
                                    "scope has ended", op=self._what)


class StreamHandle(_Lent):
    """The session stream, borrowed: do not retain, destroy or synchronize it elsewhere."""

    __slots__ = ("_stream",)

    def __init__(self, stream, scope) -> None:
        self._stream, self._scope, self._what = stream, scope, "stream handle"

    @property
    def handle(self) -> int:
        self._check()
        return int(self._stream)

    def __int__(self) -> int:
        return self.handle

    def cu_stream(self):
        self._check()
        return self._stream


class Module(_Lent):
    __slots__ = ("_module",)

    def __init__(self, module, scope) -> None:
        self._module, self._scope, self._what = module, scope, "module"

    def function(self, name: str) -> Function:
        self._check()
        return Function(_driver.module_get_function(self._module, name, "Module.function"),
                        self, name)


class Function(_Lent):
    __slots__ = ("_fn", "_module", "name")

    def __init__(self, fn, module: Module, name: str) -> None:
        self._fn, self._module, self.name = fn, module, name  # keeps its module alive
        self._scope, self._what = module._scope, "function"

    def attributes(self) -> dict[str, int]:
        self._check()
        return _driver.function_attributes(self._fn)


class RawSession:
    """Type-safe raw CUDA access for one ``with_raw`` scope."""

    _session: Any
    _stream: Any
    _scope: Any
    op: str

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("RawSession is lent by CudaExecSession.with_raw / raw")

    @classmethod
    def _make(cls, session, stream, scope, op: str) -> RawSession:
        self = object.__new__(cls)
        self._session, self._stream, self._scope, self.op = session, stream, scope, op
        return self

    def _check(self) -> None:
        if not self._scope.alive:
            raise RuntimeStateError("the raw session's scope has ended", op=self.op)
        self._session._begin(self.op)

    # --- what the session lends --------------------------------------------------------
    def stream(self) -> StreamHandle:
        self._check()
        return StreamHandle(self._stream, self._scope)

    def context(self) -> int:
        self._check()
        return self._session._rt.context_id

    def device(self) -> int:
        self._check()
        return self._session._rt.ordinal

    def tensor(self, t: _Strided) -> DevicePointer:
        """Address of element 0 of a resident tensor/view and its buffer's byte span."""
        self._check()
        self._session._resident(t, self.op)
        return DevicePointer(t.data_ptr(), t.base.nbytes - t.offset * t.itemsize, False)

    def tensor_mut(self, t: _Strided) -> DevicePointer:
        p = self.tensor(t)
        return DevicePointer(p.address, p.nbytes, True)

    def alloc_output(self, dtype: DType | str, shape: Sequence[int]) -> Tensor:
        self._check()
        shape_t = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape_t):
            raise ValidationError(f"shape entries must be >= 0 (got {shape_t})", op=self.op)
        return self._session._alloc(as_dtype(dtype), shape_t, self.op)

    def alloc_bytes(self, nbytes: int) -> Tensor:
        return self.alloc_output(DType.UINT8, (int(nbytes),))

    def upload_bytes(self, data: bytes) -> Tensor:
        self._check()
        return self._session.upload_host_tensor(np.frombuffer(bytes(data), np.uint8).copy())

    def copy_bytes(self, dst: _Strided, src: _Strided, nbytes: int) -> None:
        """Copy ``nbytes`` from ``src``'s element 0 to ``dst``'s (bounds checked)."""
        s, d = self.tensor(src), self.tensor_mut(dst)
        if not 0 <= nbytes <= min(s.nbytes, d.nbytes):
            raise ValidationError(f"copy of {nbytes} bytes exceeds the spans "
                                  f"({s.nbytes} source, {d.nbytes} destination)", op=self.op)
        if nbytes:
            _driver.memcpy_dtod_async(d.address, s.address, nbytes, self._stream, self.op)

    def download_tensor(self, t: _Strided) -> Tensor:
        self._check()
        return self._session.download_to_host(t)

    # --- modules and launches ----------------------------------------------------------
    def load_ptx(self, ptx: str | bytes) -> Module:
        self._check()
        image = ptx.encode() if isinstance(ptx, str) else bytes(ptx)
        if not image.endswith(b"\0"):
            image += b"\0"
        return Module(self._session._rt.load_module(image, self.op), self._scope)

    def load_cubin(self, cubin: bytes) -> Module:
        self._check()
        return Module(self._session._rt.load_module(bytes(cubin), self.op), self._scope)

    def compile_nvrtc(self, source: str, options: Sequence[str] = (), *,
                      name: str = "extension.cu") -> Module:
        """Compile ``source`` for this device (through the kernel cache) and load it."""
        self._check()
        rt = self._session._rt
        prog = compile_cached(source, name, (), rt.info.arch, tuple(options), op=self.op)
        return Module(rt.load_module(prog.image, self.op), self._scope)

    def launch(self, fn: Function, config: LaunchConfig, args: Sequence[KernelArg]) -> None:
        """Validate geometry against the device, then enqueue on the session stream."""
        self._check()
        fn._check()
        prepared = self._session._state.prepared
        if ("geometry", config) not in prepared:
            self._validate_geometry(config)
            prepared["geometry", config] = True
        _driver.launch(fn._fn, config.grid, config.block, config.shared_bytes,
                       self._stream, _pack_args(prepared, args), self.op)

    def _validate_geometry(self, config: LaunchConfig) -> None:
        info = self._session._rt.info
        block, grid = config.block, config.grid
        assert isinstance(block, tuple) and isinstance(grid, tuple)  # LaunchConfig made them
        bx, by, bz = block
        problems = []
        if bx * by * bz > info.max_threads_per_block:
            problems.append(f"block {block} has {bx * by * bz} threads "
                            f"(device limit {info.max_threads_per_block})")
        for name, dims, limit in (("block", block, info.max_block_dims),
                                  ("grid", grid, info.max_grid_dims)):
            if any(d > m for d, m in zip(dims, limit)):
                problems.append(f"{name} {dims} exceeds the device limits {limit}")
        if config.shared_bytes > info.max_shared_per_block:
            problems.append(f"shared_bytes {config.shared_bytes} exceeds the device limit "
                            f"{info.max_shared_per_block}")
        if problems:
            raise ValidationError("; ".join(problems), op=self.op)

    def resource(self, key, init):
        """A per-runtime cached value (e.g. a compiled module's image) for ``key``."""
        self._check()
        res = self._session._rt.resources
        if key not in res:
            if len(res) >= 256:
                res.pop(next(iter(res)))
            res[key] = init()
        return res[key]


def _pack_args(prepared: dict, args: Sequence[KernelArg]) -> int:
    """Pack into this thread's cached ArgPack for the argument signature."""
    key = ("raw-args", *[a.code for a in args])
    pack = prepared.get(key)
    if pack is None:
        pack = prepared[key] = ArgPack("".join(key[1:]))
    return pack.pack(*[a.data for a in args])
