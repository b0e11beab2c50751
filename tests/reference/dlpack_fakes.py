"""Stand-ins for the interop tests on the CPU (defines no tests).

- ``Interop(monkeypatch)``: an execution-context look-alike whose arena is a real
  ``_Arena`` of a pool that exists only as its identity, registered as the owner of that
  arena (``_foreign.owner_context``), with host memory behind its "device" addresses.
  The driver calls the interop code makes are recorded instead: ``orders`` holds
  ``(waiter, producer)`` handle pairs (``_driver_fast.order``), ``copies`` the copies
  on other streams (``_foreign.copy_on``, done with memmove), ``launches`` the kernel
  launches; ``events`` counts the events made and destroyed. The thread's context stack
  is ``reference/fake_ctx_stack.py``'s model (``model``), with our context on top.
- ``Producer``: a DLPack producer over host memory that builds capsules by hand (any
  dtype code, flags, byte_offset, version, legacy or versioned) and counts its deleter
  calls; ``asked`` records the ``stream=`` of each ``__dlpack__`` call.
- ``StreamObject``: an object speaking the ``__cuda_stream__`` protocol.
"""

from __future__ import annotations

import ctypes
import threading
from types import SimpleNamespace

import numpy as np

from tenferro_cuda import _driver, _driver_fast, _foreign, dlpack
from tenferro_cuda.dtypes import as_dtype
from tenferro_cuda.memory import _Arena
from tenferro_cuda.tensor import Tensor

from .fake_ctx_stack import Ctx, install

OUR_STREAM = 0x5150
CONTEXT_ID = 0xC0
_NEW = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))


class Interop:
    """The fake execution context (see the module docstring)."""

    def __init__(self, monkeypatch, domain: int = -31) -> None:
        pool = SimpleNamespace(domain=domain, ordinal=0, closed=False, limit=None)
        self.stream = _driver.stream_handle(OUR_STREAM)
        self.home = _Arena(pool, self.stream)  # type: ignore[arg-type]
        self.runtime = SimpleNamespace(closed=False, context="ctx",
                                       check_alive=lambda op: None)
        self.model = install(monkeypatch)
        self.context, self.context_id = Ctx(CONTEXT_ID), CONTEXT_ID
        self.model.stack.append(self.context)
        self.ordinal, self.domain = 0, domain
        self.thread = threading.get_ident()
        self.events: list = []
        self.pending: list = []
        self.closed = False
        self.capture = None  # a graph capture in progress (the export refuses then)
        self.keep: list = []  # host memory behind the fake device addresses
        self.orders: list[tuple[int, int]] = []
        self.copies: list[tuple[int, int, int, int]] = []
        self.launches: list[tuple] = []
        self.made = self.destroyed = 0
        monkeypatch.setitem(_foreign._by_arena, id(self.home), (self.home, self))
        monkeypatch.setattr(_driver_fast, "order", self._order)
        monkeypatch.setattr(_driver, "event_create", self._event)
        monkeypatch.setattr(_driver, "event_destroy", self._destroy)
        monkeypatch.setattr(_foreign, "copy_on", self._copy_on)

    @property
    def eager(self) -> bool:
        """As an ExecContext's: open, its runtime open, not capturing."""
        return not self.closed and not self.runtime.closed and self.capture is None

    # --- recorded driver calls ------------------------------------------------------------
    def _order(self, event, producer, waiter) -> None:
        assert event is not None
        self.orders.append((int(waiter), int(producer)))

    def _event(self, timing: bool = False):
        self.made += 1
        return object()

    def _destroy(self, event) -> None:
        self.destroyed += 1

    def _copy_on(self, stream, dst: int, src: int, nbytes: int, op: str) -> None:
        self.copies.append((int(stream), dst, src, nbytes))
        ctypes.memmove(dst, src, nbytes)

    # --- what ops ask of an ExecContext -----------------------------------------------------
    def tensor(self, array: np.ndarray) -> Tensor:
        """A device-looking compact tensor of this context holding ``array``."""
        array = np.ascontiguousarray(array)
        self.keep.append(array)
        buf = self.home.adopt(array.ctypes.data, array.nbytes, None)
        return Tensor._make(as_dtype(array.dtype), tuple(array.shape), buffer=buf)

    def alloc(self, dtype, shape, op: str) -> Tensor:
        return self.tensor(np.zeros(shape, dtype.numpy))

    def adopt(self, ptr: int, nbytes: int, owner: object):
        return self.home.adopt(ptr, nbytes, owner)

    def copy(self, dst: int, src: int, nbytes: int, op: str) -> None:
        self.copies.append((OUR_STREAM, dst, src, nbytes))
        ctypes.memmove(dst, src, nbytes)

    def function(self, family: str, expression: str) -> str:
        return expression

    def launch(self, fn, codes, grid, args, op, block=(256, 1, 1), shared=0) -> None:
        self.launches.append((fn, codes, grid, args))

    def grid(self, n: int, block: int = 256, per_thread: int = 1) -> int:
        return max(1, -(-n // block))

    def pointer_device(self, address: int) -> int:
        return 0

    def flush(self) -> None:
        self.pending.clear()


def consume(capsule):
    """What a consumer does: read, rename, and (when its array goes) call the deleter.
    Returns the capsule's fields and the owner whose release calls the deleter."""
    info = dlpack.parse_capsule(capsule)
    return info, dlpack.consume(capsule, info)


def read(address: int, dtype, count: int) -> np.ndarray:
    """``count`` elements of ``dtype`` at ``address`` (host memory)."""
    return np.frombuffer(ctypes.string_at(address, count * dtype.itemsize), dtype.numpy)


# Producers live as long as the process, like a C library's deleter functions: an owner
# calls the deleter through its address after the test that made it may have ended.
_ALIVE: list = []


class Producer:
    """A hand-made DLPack producer over host memory (see the module docstring)."""

    def __init__(self, array: np.ndarray, *, code: int | None = None, bits: int | None = None,
                 flags: int = 0, byte_offset: int = 0, major: int = 1, versioned: bool = True,
                 device: tuple[int, int] = (2, 0), strides: tuple[int, ...] | None = None,
                 legacy_signature: bool = False) -> None:
        self.array = np.ascontiguousarray(array)
        self.calls = 0
        self.asked: list = []
        self.device = device
        n = self.array.ndim
        self.shape = (ctypes.c_int64 * max(n, 1))(*self.array.shape)
        self.strides = (ctypes.c_int64 * max(n, 1))(*strides) if strides else None
        if code is None:
            code, bits = dlpack.dl_code_bits(as_dtype(self.array.dtype))
        self.versioned = versioned
        m = dlpack.DLManagedTensorVersioned() if versioned else dlpack.DLManagedTensor()
        if versioned:
            m.version = dlpack.DLPackVersion(major, 1)
            m.flags = flags
        t = m.dl_tensor
        t.data = self.array.ctypes.data - byte_offset
        t.device = dlpack.DLDevice(*device)
        t.ndim = n
        t.dtype = dlpack.DLDataType(code, bits or 8 * self.array.itemsize, 1)
        t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            t.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = byte_offset
        self.managed = m

        @dlpack.DELETER
        def deleter(address):
            assert address == ctypes.addressof(self.managed)
            self.calls += 1

        self._deleter = deleter
        m.deleter = deleter
        _ALIVE.append(self)
        if legacy_signature:
            self.__dlpack__ = self._legacy_dlpack  # type: ignore[method-assign]

    def capsule(self):
        name = b"dltensor_versioned" if self.versioned else b"dltensor"
        return _NEW(ctypes.addressof(self.managed), name, None)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.asked.append(stream)
        return self.capsule()

    def _legacy_dlpack(self, stream=None):
        self.asked.append(stream)
        return self.capsule()

    def __dlpack_device__(self):
        return self.device


class LegacyProducer(Producer):
    """A producer whose ``__dlpack__`` takes ``stream`` only (before DLPack 1.0)."""

    tries = 0  # calls, failed ones included

    def __dlpack__(self, stream=None, **unknown):  # type: ignore[override]
        LegacyProducer.tries += 1
        if unknown:
            raise TypeError(f"__dlpack__() got unexpected keyword arguments {sorted(unknown)}")
        self.asked.append(stream)
        return self.capsule()


class StreamObject:
    """``__cuda_stream__`` returning ``result`` (default ``(0, handle)``)."""

    def __init__(self, handle: int = 0, result=None) -> None:
        self.result = (0, handle) if result is None else result

    def __cuda_stream__(self):
        return self.result
