"""DLPack export: the capsules behind ``Tensor.__dlpack__`` (rules in ``dlpack.py``).

The DLManagedTensor and its shape/strides arrays of every exported capsule live in
``_exports`` until the consumer calls the deleter, or until the capsule dies unconsumed
(its destructor calls the deleter then). The deleter acts once: it makes the tensor's
stream wait for the consumer's stream when that is a default stream (1 or 2; any other
stream may be destroyed by then, and the consumer must have finished with the memory, as
PyTorch and CuPy require for memory they import), drops the reference to the tensor, and
never raises.
"""

from __future__ import annotations

import ctypes
import sys

from .dlpack import (
    _F0,
    _F1,
    _F2,
    _FETCHED,
    _NAME,
    _NAME_V,
    _OURS,
    CAPSULE_DESTRUCTOR,
    DELETER,
    DLPACK_VERSION,
    DLDevice,
    DLDeviceType,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLPackVersion,
    _capsule_new,
    _err_fetch,
    _err_restore,
    _raw_capsule_name,
    _raw_capsule_pointer,
    to_dl_dtype,
)
from .errors import RuntimeStateError

__all__ = ["export_capsule", "live_exports"]


def _report_pending(pending: tuple, where: str) -> None:
    """Print an exception that was pending when a callback was entered (see module doc)."""
    if not pending[0]:
        return
    try:
        _err_restore(*pending)  # steals the references; ctypes raises it right here
    except BaseException as exc:  # noqa: BLE001 - printed, never propagated
        print(f"tenferro_cuda: an exception was pending when the DLPack {where} ran and "
              f"could not be passed on: {exc!r}", file=sys.stderr)


class _Export:
    """What one exported capsule keeps alive until its deleter runs."""

    __slots__ = ("managed", "shape", "strides", "tensor", "consumer", "home")

    def __init__(self, managed, shape, strides, tensor, consumer, home) -> None:
        self.managed = managed
        self.shape = shape
        self.strides = strides
        self.tensor = tensor
        self.consumer = consumer
        self.home = home  # runtime or pool owning the tensor's stream (see _foreign)


_exports: dict[int, _Export] = {}


def _release_export(address: int) -> None:
    record = _exports.pop(address, None)
    if record is None or sys.is_finalizing():
        return
    buf, home = record.tensor.base.buffer, record.home
    # Only the default streams (1, 2) are certain to exist when the deleter runs: a
    # consumer's own stream may already be destroyed, and recording on it would crash the
    # driver. For other streams the consumer must have finished with the memory (the rule
    # PyTorch and CuPy follow for imported memory too).
    consumer_alive = record.consumer is not None and int(record.consumer) in (1, 2)
    if consumer_alive and not buf.freed and not (home and home.closed):
        from ._foreign import order_after

        context = home.context if home is not None else None
        try:  # our stream reuses the memory only after the consumer's work on its stream
            order_after(buf.stream, record.consumer, context, "dlpack_deleter")
        except Exception:  # noqa: BLE001 - runtime closed or context lost: nothing to order
            pass


@DELETER
def _deleter(address):
    _err_fetch(_F0, _F1, _F2)
    pending = (_FETCHED[0].value, _FETCHED[1].value, _FETCHED[2].value)
    try:
        _release_export(address)
    except BaseException as exc:  # noqa: BLE001 - deleters never raise
        print(f"tenferro_cuda: DLPack deleter failed: {exc!r}", file=sys.stderr)
    _report_pending(pending, "deleter")


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    _err_fetch(_F0, _F1, _F2)
    pending = (_FETCHED[0].value, _FETCHED[1].value, _FETCHED[2].value)
    try:
        name = _raw_capsule_name(capsule)
        if name in _OURS:  # not renamed "used_...": nobody took ownership
            _release_export(_raw_capsule_pointer(capsule, name))
    except BaseException as exc:  # noqa: BLE001 - destructors never raise
        print(f"tenferro_cuda: DLPack capsule destructor failed: {exc!r}", file=sys.stderr)
    _report_pending(pending, "capsule destructor")


_DESTRUCTOR_ADDRESS = ctypes.cast(_capsule_destructor, ctypes.c_void_p).value


def _check_export_args(buf, max_version, dl_device, copy) -> tuple[int, int] | None:
    """Validate the keyword arguments of ``__dlpack__``; the version of a versioned capsule
    to make, or None for a legacy one."""
    if copy:
        raise BufferError("__dlpack__(copy=True): tenferro_cuda exports its memory without "
                          "copying; copy on the consumer side or use copy=None/False")
    if dl_device is not None:
        try:
            wanted = (int(dl_device[0]), int(dl_device[1]))
        except (TypeError, ValueError, IndexError):
            raise BufferError(f"__dlpack__: dl_device must be (device_type, device_id) "
                              f"(got {dl_device!r})") from None
        if wanted != (DLDeviceType.kDLCUDA, buf.ordinal):
            raise BufferError(f"__dlpack__: the tensor is on CUDA device {buf.ordinal}; "
                              f"dl_device={wanted} would need a copy, which export never makes")
    if max_version is None:
        return None
    try:
        major, minor = (int(v) for v in max_version)
    except (TypeError, ValueError):
        raise BufferError(f"__dlpack__: max_version must be (major, minor) "
                          f"(got {max_version!r})") from None
    if major < 1:
        return None
    ours = DLPACK_VERSION[1]
    return DLPACK_VERSION[0], (min(minor, ours) if major == DLPACK_VERSION[0] else ours)


def export_capsule(tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """``__dlpack__``: a capsule over ``tensor``'s device memory (see ``dlpack.py``)."""
    from ._foreign import consumer_stream, export_home, order_after

    op = "__dlpack__"
    buf = tensor.base.buffer
    if buf is None:
        raise BufferError("__dlpack__: this is a host tensor; export GPU tensors only "
                          "(tensor.numpy() gives the host data)")
    if buf.freed:
        raise RuntimeStateError("cannot export a reclaimed tensor (its buffer was released)",
                                op=op)
    version = _check_export_args(buf, max_version, dl_device, copy)
    consumer = consumer_stream(stream, op)
    home = export_home(buf, op)
    if consumer is not None:
        order_after(consumer, buf.stream, home.context if home is not None else None, op)
    return _make_capsule(tensor, version, consumer, home)


def _make_capsule(tensor, version: tuple[int, int] | None, consumer, home):
    n = tensor.ndim
    shape = (ctypes.c_int64 * max(n, 1))(*tensor.shape)
    strides = (ctypes.c_int64 * max(n, 1))(*tensor.strides)
    managed = DLManagedTensorVersioned() if version else DLManagedTensor()
    dl = managed.dl_tensor
    dl.data = tensor.data_ptr() if tensor.size else None
    dl.device = DLDevice(DLDeviceType.kDLCUDA, tensor.base.buffer.ordinal)
    dl.ndim = n
    dl.dtype = to_dl_dtype(tensor.dtype)
    dl.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    dl.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    dl.byte_offset = 0
    managed.deleter = _deleter
    if version:
        managed.version = DLPackVersion(*version)
        managed.flags = 0
    address = ctypes.addressof(managed)
    _exports[address] = _Export(managed, shape, strides, tensor, consumer, home)
    try:
        name = _NAME_V if version else _NAME
        return _capsule_new(address, ctypes.addressof(name), _DESTRUCTOR_ADDRESS)
    except BaseException:
        _exports.pop(address, None)
        raise


def live_exports(tensor=None) -> int:
    """How many exported capsules (of ``tensor``, or of any tensor) still wait for their
    deleter (tests, diagnostics)."""
    if tensor is None:
        return len(_exports)
    return sum(1 for record in list(_exports.values()) if record.tensor is tensor)
