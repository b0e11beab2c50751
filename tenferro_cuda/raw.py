"""``RawSession``: the extension author's view of the session (DESIGN 3.1).

Everything a raw session lends (the stream handle, modules, functions, device pointers)
is valid only inside its ``with_raw``/``raw`` scope and on its thread; afterwards, or from
another thread, every use raises RuntimeStateError. None of them can be copied or pickled
(TypeError). Launch geometry and shared memory are validated against the device limits
before any launch; launches go through the library's launcher (``kernels/launch.py``).
When the body made another context current, device work of the raw session runs with
ours pushed and popped again. Nothing here synchronizes except ``download_tensor``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _driver
from .authority import Authority, Scope
from .dtypes import DType, as_dtype
from .errors import ValidationError
from .exec import entry, guard
from .exec.context import ExecContext
from .exec.residency import resident
from .kernels.compiler import compile_cached
from .kernels.launch import check_geometry
from .raw_args import _BYTES_LIKE, KernelArg, LaunchConfig, _bytes_like, _texts
from .raw_lent import DevicePointer, Function, Module, StreamHandle
from .shapes import check_rank, check_size
from .shapes.aliasing import check_writable
from .tensor import Tensor, _Strided
from .values import int_sequence

__all__ = ["RawSession", "LaunchConfig", "KernelArg", "StreamHandle", "Module", "Function",
           "DevicePointer"]


class RawSession(Authority):
    """Type-safe raw CUDA access for one ``with_raw`` scope."""

    __slots__ = ("_session", "_ctx", "_scope", "op")
    _session: Any
    _ctx: ExecContext
    _scope: Scope
    op: str

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("RawSession is lent by CudaExecSession.with_raw / raw")

    @classmethod
    def _make(cls, session, ctx: ExecContext, scope: Scope, op: str) -> RawSession:
        self = object.__new__(cls)
        self._session, self._ctx, self._scope, self.op = session, ctx, scope, op
        return self

    def _check(self) -> ExecContext:
        self._scope.check(self.op)
        return entry.check(self._session, self.op, "raw")

    def _device(self, fn, *args):
        """``fn(*args)`` with our context current (pushed and popped when the body made
        another one current)."""
        return guard.call_current(self._check(), fn, *args)

    # --- what the session lends --------------------------------------------------------
    def stream(self) -> StreamHandle:
        """The session stream (borrowed for this scope)."""
        return StreamHandle(self._check().stream, self._scope)

    def context(self) -> int:
        """The runtime's primary context, as an int."""
        return self._check().context_id

    def device(self) -> int:
        """The device ordinal."""
        return self._check().ordinal

    def tensor(self, t: _Strided) -> DevicePointer:
        """Address of element 0 of a resident tensor/view and its buffer's byte span."""
        ctx = self._check()
        resident(ctx, t, self.op)
        if ctx.capture is not None:  # the graph keeps it, lists it, may rebind it
            ctx.capture.note(t)
        return DevicePointer(t.data_ptr(), t.base.nbytes - t.offset * t.itemsize, False,
                             self._scope)

    def tensor_mut(self, t: _Strided) -> DevicePointer:
        """``tensor(t)`` for writing (ValidationError for read-only memory)."""
        p = self.tensor(t)
        check_writable(t, self.op, "tensor_mut")
        capture = self._ctx.capture
        if capture is not None:
            capture.note(t, written=True)
        return DevicePointer(p._address, p.nbytes, True, self._scope)

    def alloc_output(self, dtype: DType | str, shape: Sequence[int]) -> Tensor:
        """A new compact device tensor (contents undefined)."""
        ctx = self._check()
        dt = as_dtype(dtype)
        shape_t = _shape(shape, self.op, dt.itemsize)
        return self._device(ctx.alloc, dt, shape_t, self.op)

    def alloc_bytes(self, nbytes: int) -> Tensor:
        """A new uint8 device tensor of ``nbytes`` elements (an int >= 0)."""
        try:
            n = -1 if type(nbytes) is bool else operator.index(nbytes)
        except TypeError:
            n = -1
        if n < 0:
            raise ValidationError(f"nbytes must be an int >= 0 (got {nbytes!r:.80})",
                                  op=self.op)
        return self.alloc_output(DType.UINT8, (n,))

    def upload_bytes(self, data: bytes) -> Tensor:
        """A new uint8 device tensor holding ``data`` (bytes, a bytearray or a
        memoryview)."""
        self._check()
        entry.check(self._session, "upload_bytes", "upload_host_tensor")  # (in a capture)
        image = _bytes_like(data, "upload_bytes data", self.op)
        return self._session.upload_host_tensor(np.frombuffer(image, np.uint8).copy())

    def copy_bytes(self, dst: _Strided, src: _Strided, nbytes: int) -> None:
        """Copy ``nbytes`` from ``src``'s element 0 to ``dst``'s (bounds checked)."""
        s, d = self.tensor(src), self.tensor_mut(dst)
        if type(nbytes) is not int or not 0 <= nbytes <= min(s.nbytes, d.nbytes):
            raise ValidationError(f"copy of {nbytes!r} bytes exceeds the spans "
                                  f"({s.nbytes} source, {d.nbytes} destination)", op=self.op)
        if s._address < d._address + nbytes and d._address < s._address + nbytes:
            raise ValidationError("copy_bytes: the source and destination ranges overlap",
                                  op=self.op)
        if nbytes:
            self._device(self._ctx.copy, d._address, s._address, nbytes, self.op)

    def download_tensor(self, t: _Strided) -> Tensor:
        """A host copy of ``t`` (blocks until it is there; refused during a capture)."""
        self._scope.check(self.op)
        entry.check(self._session, "download_tensor", "download_to_host")  # (capture rule)
        return self._session.download_to_host(t)

    # --- modules and launches ----------------------------------------------------------
    def load_ptx(self, ptx: str | bytes) -> Module:
        """Load PTX text (a str, or bytes, a bytearray or a memoryview) into the
        runtime's context."""
        ctx = self._check()
        if isinstance(ptx, str):
            try:
                image = ptx.encode()
            except UnicodeEncodeError as exc:
                raise ValidationError(f"load_ptx: the PTX text cannot be encoded: {exc}",
                                      op=self.op) from None
        elif isinstance(ptx, _BYTES_LIKE):
            image = _bytes_like(ptx, "load_ptx", self.op)
        else:
            raise ValidationError(f"load_ptx takes PTX text: a str, bytes, a bytearray or a "
                                  f"memoryview (got {type(ptx).__name__})", op=self.op)
        if not image.endswith(b"\0"):
            image += b"\0"
        return Module(ctx.runtime.load_module(image, self.op), ctx, self._scope)

    def load_cubin(self, cubin: bytes) -> Module:
        """Load a cubin (or fatbin) image (bytes, a bytearray or a memoryview) into the
        runtime's context."""
        ctx = self._check()
        image = _bytes_like(cubin, "load_cubin image", self.op)
        return Module(ctx.runtime.load_module(image, self.op), ctx, self._scope)

    def compile_nvrtc(self, source: str, options: Sequence[str] = (), *,
                      name: str = "extension.cu") -> Module:
        """Compile ``source`` for this device (through the kernel cache) and load it;
        ``options`` is a sequence of str (a list or tuple, never one string)."""
        ctx = self._check()
        opts = _texts(options, "compile_nvrtc options", self.op)
        if not isinstance(source, str) or not isinstance(name, str):
            raise ValidationError(f"compile_nvrtc takes the source and its name as str (got "
                                  f"{type(source).__name__}, {type(name).__name__})",
                                  op=self.op)
        module = ctx.runtime.load_compiled(
            lambda fresh: compile_cached(source, name, (), ctx.info.arch, opts, op=self.op,
                                         fresh=fresh), self.op, shared=True)
        return Module(module, ctx, self._scope)

    def launch(self, fn: Function, config: LaunchConfig, args: Sequence[KernelArg]) -> None:
        """Validate geometry against the device, then enqueue on the session stream."""
        ctx = self._check()
        if not isinstance(fn, Function):
            raise ValidationError(f"fn must be a Function lent by this scope (got "
                                  f"{type(fn).__name__})", op=self.op)
        fn._check()
        if fn._module._ctx is not ctx:  # lent by the session of another device or thread
            raise ValidationError(f"fn {fn.name!r} was lent by the session of device "
                                  f"{getattr(fn._module._ctx, 'ordinal', '?')}, not by this "
                                  f"one (device {ctx.ordinal}); launch it on its own session",
                                  op=self.op)
        if not isinstance(config, LaunchConfig):
            raise ValidationError(f"config must be a LaunchConfig (got "
                                  f"{type(config).__name__})", op=self.op)
        if type(args) not in (list, tuple) and not isinstance(args, Sequence):
            raise ValidationError(f"args must be a sequence (list or tuple) of KernelArg "
                                  f"values (got {type(args).__name__})", op=self.op)
        codes, data = "", []
        for a in args:  # one pass: check, codes, values (nothing is launched on a failure)
            if not isinstance(a, KernelArg):
                raise ValidationError(f"args must be KernelArg values (got "
                                      f"{type(a).__name__})", op=self.op)
            codes += a.code
            data.append(a.data)
        grid, block, shared = config.grid, config.block, config.shared_bytes
        assert isinstance(grid, tuple) and isinstance(block, tuple)  # LaunchConfig made them
        key = ("raw", codes, grid, block, shared, id(fn._fn))
        launch = ctx.launches.get(key)
        if launch is None or launch.fn is not fn._fn:  # prepared, geometry validated once
            check_geometry(ctx.info, grid, block, shared, self.op)
            self._device(_fit_function, fn._fn, ctx.info, block, shared, self.op)
            launch = ctx.prepare(key, fn._fn, codes, block=block, shared=shared, op=self.op)
        guard.call_current(ctx, launch.run3, grid, *data)

    def resource(self, key, init):
        """A per-runtime cached value (e.g. a compiled module's image) for ``key``."""
        ctx = self._check()
        res = ctx.runtime.resources
        value = res.get(key, _MISSING)
        if value is _MISSING:
            value = res.put(key, init())
        return value

    def __repr__(self) -> str:
        state = "open" if self._scope.alive else "closed"
        return f"<RawSession op={self.op!r} {state}>"


_MISSING = object()


def _fit_function(fn: Any, info: Any, block: tuple[int, int, int], shared: int,
                  op: str) -> None:
    """Check a launch against the kernel's own limits (its largest block, its static
    shared memory) and opt it in to ``shared`` bytes of dynamic shared memory when that
    is above what it allows now; ValidationError before anything is launched."""
    attrs = _driver.function_attributes(fn)
    threads = block[0] * block[1] * block[2]
    if threads > attrs["max_threads_per_block"]:
        raise ValidationError(f"block {block} has {threads} threads; this kernel launches "
                              f"at most {attrs['max_threads_per_block']} (its registers or "
                              "__launch_bounds__)", op=op)
    if shared + attrs["shared_bytes"] > info.max_shared_per_block:
        raise ValidationError(f"{shared} bytes of dynamic shared memory and the kernel's "
                              f"{attrs['shared_bytes']} static bytes exceed the device limit "
                              f"of {info.max_shared_per_block}", op=op)
    if shared > attrs["max_dynamic_shared"]:
        _driver.function_allow_dynamic_shared(fn, shared, op)


def _shape(shape: Sequence[int], op: str, itemsize: int = 1) -> tuple[int, ...]:
    """A requested shape: a sequence of ints >= 0 (no bools, sets or iterators), rank <= 8,
    every extent and the byte size below 2**63 (``shapes``' rules for every op)."""
    dims = int_sequence(shape, op, "shape")
    if any(s < 0 for s in dims):
        raise ValidationError(f"shape entries must be >= 0 (got {dims})", op=op)
    check_rank(dims, op)
    check_size(dims, op, itemsize)
    return dims
