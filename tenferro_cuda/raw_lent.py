"""What a raw or kernel sub-session lends: the stream handle, modules, functions and
device pointers. Each checks its thread and its scope (and its session's) on every use,
accessors included, and none can be copied or pickled; a repr never shows a handle or an
address once the scope has ended or on another thread.
"""

from __future__ import annotations

import threading

from . import _driver
from .authority import Authority, Scope
from .errors import ValidationError
from .exec.context import ExecContext

__all__ = ["DevicePointer", "StreamHandle", "Module", "Function"]


class DevicePointer(Authority):
    """A residency-checked device address and the byte span behind it, valid only inside
    the scope that lent it (``int(p)`` and ``p.address`` check thread and scope)."""

    __slots__ = ("_address", "_nbytes", "_writable", "_scope")

    def __init__(self, address: int, nbytes: int, writable: bool, scope: Scope) -> None:
        self._address, self._nbytes, self._writable = address, nbytes, writable
        self._scope = scope

    @property
    def address(self) -> int:
        self._scope.check("DevicePointer")
        return self._address

    @property
    def nbytes(self) -> int:
        """The bytes from the address to the end of the tensor's buffer."""
        self._scope.check("DevicePointer")
        return self._nbytes

    @property
    def writable(self) -> bool:
        self._scope.check("DevicePointer")
        return self._writable

    def __int__(self) -> int:
        return self.address

    def __index__(self) -> int:
        return self.address

    def __repr__(self) -> str:
        if not _usable(self._scope):
            return "DevicePointer(<scope ended or another thread>)"
        mode = "writable" if self._writable else "read-only"
        return f"DevicePointer(0x{self._address:x}, {self._nbytes} B, {mode})"


def _usable(scope: Scope) -> bool:
    """Whether ``scope`` is open on the calling thread (for reprs, which never raise)."""
    return scope.live and scope.thread == threading.get_ident()


class _Lent(Authority):
    """An object lent by a sub-session: checks its thread and scope on every use."""

    __slots__ = ("_scope", "_what")
    _scope: Scope
    _what: str

    def _check(self) -> None:
        self._scope.check(self._what)


class StreamHandle(_Lent):
    """The session stream, borrowed: do not retain, destroy or synchronize it elsewhere.

    It speaks cuda.core's stream protocol: ``__cuda_stream__()`` returns ``(0, handle)``,
    so ``cuda.core``'s ``Device().create_stream(s.stream)``, and every tenferro API that
    takes a stream (``__dlpack__(stream=...)``, ``from_dlpack(..., stream=...)``), accept
    it; ``int(h)`` is the raw handle (``torch.cuda.ExternalStream(int(h))``)."""

    __slots__ = ("_stream",)

    def __init__(self, stream, scope: Scope, what: str = "stream handle") -> None:
        self._stream, self._scope, self._what = stream, scope, what

    @property
    def handle(self) -> int:
        self._check()
        return int(self._stream)

    def __int__(self) -> int:
        return self.handle

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol (version 0): ``(0, handle)``."""
        self._check()
        return 0, int(self._stream)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, StreamHandle):
            self._check()
            other._check()
            return int(self._stream) == int(other._stream)
        return NotImplemented

    def __hash__(self) -> int:
        self._check()
        return hash((StreamHandle, int(self._stream)))  # not the handle's own value

    def __repr__(self) -> str:
        if not _usable(self._scope):
            return f"<StreamHandle ({self._what}; scope ended or another thread)>"
        return f"<StreamHandle 0x{int(self._stream):x} ({self._what})>"

    def cu_stream(self):
        self._check()
        return self._stream


class Module(_Lent):
    """A loaded module; ``function(name)`` looks up a kernel in it. ``_ctx`` is the
    execution context (device and thread) that lent it: its functions launch only there."""

    __slots__ = ("_module", "_ctx")

    def __init__(self, module, ctx: ExecContext, scope: Scope) -> None:
        self._module, self._ctx, self._scope, self._what = module, ctx, scope, "module"

    def function(self, name: str) -> Function:
        """The kernel ``name`` (a str: its mangled or ``extern "C"`` name)."""
        self._check()
        if not isinstance(name, str):
            raise ValidationError(f"the kernel name must be a str (got {type(name).__name__})",
                                  op="Module.function")
        with self._ctx.runtime.current():
            fn = _driver.module_get_function(self._module, name, "Module.function")
        return Function(fn, self, name)


class Function(_Lent):
    """A kernel of a module (keeps its module alive)."""

    __slots__ = ("_fn", "_module", "name")

    def __init__(self, fn, module: Module, name: str) -> None:
        self._fn, self._module, self.name = fn, module, name
        self._scope, self._what = module._scope, "function"

    def attributes(self) -> dict[str, int]:
        """Registers, shared and local bytes and the largest block of this kernel."""
        self._check()
        with self._module._ctx.runtime.current():
            return _driver.function_attributes(self._fn)
