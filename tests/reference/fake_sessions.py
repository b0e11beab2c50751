"""Sessions and NCCL on the CPU for the communicator's tests: ``Ctx`` (a ``FakeContext``
of one device, with its own stream handle and allocation domain), ``Session`` (what the
communicator reads of a session: its context, scope and runtime; the entry checks on it
are the real ones), ``install(monkeypatch)`` (a ``FakeNccl`` in place of nccl4py, the
session type registered, the context guard made a no-op that records ``within`` calls),
and ``put``/``get``/``names``.
"""

from __future__ import annotations

import ctypes
from types import SimpleNamespace

import numpy as np

import tenferro_cuda as tc
from tenferro_cuda import _nccl
from tenferro_cuda.authority import Scope
from tenferro_cuda.exec import entry, guard
from tenferro_cuda.tensor import Tensor

from .fake_context import FakeContext, HostMemory
from .fake_nccl import FakeNccl

__all__ = ["Ctx", "Session", "install", "put", "get", "names"]


class Ctx(FakeContext):
    def __init__(self, memory: HostMemory, ordinal: int) -> None:
        super().__init__(memory, None)
        self.ordinal, self.domain = ordinal, 100 + ordinal
        self.context = self.context_id = 50 + ordinal
        self.stream = 0x7000 + ordinal
        self.runtime = SimpleNamespace(identity=SimpleNamespace(serial=ordinal),
                                       check_alive=lambda op: None)

    def alloc(self, dtype, shape, op: str) -> Tensor:
        t = super().alloc(dtype, shape, op)
        t.base.buffer.ordinal, t.base.buffer.domain = self.ordinal, self.domain
        return t


class Session:
    """What the communicator reads of a session: its context, scope and runtime."""

    def __init__(self, ctx: Ctx) -> None:
        self._ctx, self._scope = ctx, Scope("session")
        self._rt = SimpleNamespace(ordinal=ctx.ordinal)


class _Within:
    def __init__(self, log: list, context, context_id) -> None:
        log.append(context_id)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def install(monkeypatch) -> FakeNccl:
    """A FakeNccl as the loaded bindings (its ``within`` lists the contexts made current)."""
    lib = FakeNccl()
    monkeypatch.setattr(_nccl, "_state", {"lib": lib, "version": (2, 28, 9)})
    monkeypatch.setattr(entry, "_session_types", [Session])
    monkeypatch.setattr(guard, "foreign_call", lambda fn, *args: fn(*args))
    lib.within = []
    monkeypatch.setattr(guard, "within", lambda c, i: _Within(lib.within, c, i))
    return lib


def put(session: Session, a) -> Tensor:
    a = np.ascontiguousarray(a)
    t = session._ctx.alloc(tc.as_dtype(a.dtype), a.shape, "test")
    ctypes.memmove(t.data_ptr(), a.ctypes.data, a.nbytes)
    return t


def get(t) -> np.ndarray:
    raw = (ctypes.c_char * t.nbytes).from_address(t.data_ptr())
    return np.frombuffer(bytes(raw), t.dtype.numpy).reshape(t.shape)


def names(lib: FakeNccl) -> list[str]:
    return [name for name, _ in lib.log]
