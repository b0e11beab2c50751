"""DLPack 1.x: ctypes mirrors of ``dlpack.h``, the dtype mapping, capsules both ways.

Export (``_dlpack_export.export_capsule``, behind ``Tensor.__dlpack__``):
- ``max_version`` None or below (1, 0): a legacy ``"dltensor"`` capsule (DLManagedTensor);
  otherwise ``"dltensor_versioned"`` (DLManagedTensorVersioned, version 1.x, flags 0).
- ``data`` is the address of element (0, ..., 0) and ``byte_offset`` is 0 (what PyTorch and
  CuPy produce and expect); shape and element strides (maybe negative) are always given.
- ``stream=S`` (None: the legacy default stream 1; -1: no synchronization): S waits on an
  event recorded on the tensor's stream before the capsule is returned.
- ``copy=True`` and a ``dl_device`` other than the tensor's raise BufferError (we never copy).
- The DLManagedTensor and its shape/strides arrays live until the consumer calls the
  deleter, or until the capsule dies unconsumed (its destructor calls the deleter then).
  The deleter acts once: it makes the tensor's stream wait for S (so the memory is not
  reused under the consumer's kernels), drops the reference to the tensor, never raises.

Import (``parse_capsule`` then ``consume``, used by ``session.from_dlpack``):
- ``parse_capsule`` validates name, version, dtype and shape before anything changes; a
  rejected capsule stays with its producer, whose destructor frees it.
- ``consume`` renames the capsule ``used_*`` and returns a ``ForeignOwner`` whose ``__del__``
  calls the producer's deleter exactly once, when our stream is done (see ``_foreign``).

ctypes callbacks take the GIL. CPython cannot hand a pending exception through a ctypes
callback (a consumer that failed and then dropped our capsule): the callbacks clear it
first, do their work, and print it to stderr.
"""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass

from .dtypes import DType
from .errors import RuntimeStateError, UnsupportedDTypeError, ValidationError

__all__ = ["DLPACK_VERSION", "DLDeviceType", "DLDataTypeCode", "DLPackVersion", "DLDevice",
           "DLDataType", "DLTensor", "DLManagedTensor", "DLManagedTensorVersioned",
           "to_dl_dtype", "from_dl_dtype", "check_device", "dlpack_device", "parse_capsule",
           "consume", "request_capsule", "ForeignOwner", "DLPackInfo"]

DLPACK_VERSION = (1, 1)
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1


class DLDeviceType(enum.IntEnum):
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17
    kDLTrn = 18


class DLDataTypeCode(enum.IntEnum):
    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLOpaqueHandle = 3
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*)(DLManagedTensor[Versioned]*)
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*)(PyObject*)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# --- dtypes and devices ----------------------------------------------------------------

_C = DLDataTypeCode
_TO_DL: dict[DType, tuple[int, int]] = {
    DType.BOOL: (_C.kDLBool, 8), DType.INT8: (_C.kDLInt, 8), DType.UINT8: (_C.kDLUInt, 8),
    DType.INT32: (_C.kDLInt, 32), DType.INT64: (_C.kDLInt, 64),
    DType.FLOAT16: (_C.kDLFloat, 16), DType.BFLOAT16: (_C.kDLBfloat, 16),
    DType.FLOAT32: (_C.kDLFloat, 32), DType.FLOAT64: (_C.kDLFloat, 64),
    DType.COMPLEX64: (_C.kDLComplex, 64), DType.COMPLEX128: (_C.kDLComplex, 128),
}
_FROM_DL = {v: k for k, v in _TO_DL.items()}


def to_dl_dtype(dtype: DType) -> DLDataType:
    """The DLDataType of ``dtype`` (lanes 1; bool is kDLBool with 8 bits)."""
    code, bits = _TO_DL[dtype]
    return DLDataType(code, bits, 1)


def from_dl_dtype(code: int, bits: int, lanes: int, op: str = "from_dlpack") -> DType:
    """The DType of a DLDataType; UnsupportedDTypeError for anything outside our 11."""
    dtype = _FROM_DL.get((int(code), int(bits)))
    if dtype is None or lanes != 1:
        try:
            name = DLDataTypeCode(code).name
        except ValueError:
            name = f"code {code}"
        raise UnsupportedDTypeError(
            f"DLPack dtype ({name}, {bits} bits, {lanes} lanes) is not one of "
            f"{', '.join(d.value for d in _TO_DL)} (lanes must be 1)", op=op)
    return dtype


_HOST_DEVICES = (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost, DLDeviceType.kDLROCMHost)


def _device_name(dev_type: int) -> str:
    try:
        return DLDeviceType(dev_type).name
    except ValueError:
        return f"device type {dev_type}"


def check_device(device, ordinal: int, op: str = "from_dlpack") -> None:
    """Accept a DLPack device only when it is CUDA memory usable on device ``ordinal``.

    Host memory raises ValidationError (pointing to ``upload_host_tensor``), a non-CUDA
    device ValidationError, another CUDA device RuntimeStateError naming it.
    """
    try:
        dev_type, dev_id = int(device[0]), int(device[1])
    except (TypeError, ValueError, IndexError):
        raise ValidationError(f"__dlpack_device__ must give (device_type, device_id) "
                              f"(got {device!r})", op=op) from None
    if dev_type in _HOST_DEVICES:
        raise ValidationError(
            f"the array lives in host memory ({_device_name(dev_type)}); {op} adopts GPU "
            f"memory only: copy host data with session.upload_host_tensor(array)", op=op)
    if dev_type == DLDeviceType.kDLCUDAManaged:
        return  # managed memory reports device_id 0 and is usable from every device
    if dev_type != DLDeviceType.kDLCUDA:
        raise ValidationError(f"the array is on a {_device_name(dev_type)} device, not a "
                              f"CUDA device", op=op)
    if dev_id != ordinal:
        raise RuntimeStateError(f"the array is on CUDA device {dev_id}; this session runs "
                                f"on CUDA device {ordinal}", op=op)


def dlpack_device(tensor) -> tuple[DLDeviceType, int]:
    """``__dlpack_device__``: (kDLCUDA, ordinal) for device tensors, (kDLCPU, 0) on host."""
    buf = tensor.base.buffer
    if buf is None:
        return DLDeviceType.kDLCPU, 0
    return DLDeviceType.kDLCUDA, int(buf.ordinal)


# --- Python C-API entry points (private prototypes; ctypes.pythonapi is left untouched) --

def _proto(name: str, restype, *argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_vp = ctypes.c_void_p
_capsule_new = _proto("PyCapsule_New", ctypes.py_object, _vp, _vp, _vp)
_capsule_is_valid = _proto("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_capsule_get_pointer = _proto("PyCapsule_GetPointer", _vp, ctypes.py_object, ctypes.c_char_p)
_capsule_set_name = _proto("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, _vp)
# Inside a capsule destructor the object is being deallocated: only raw addresses, no refs.
_raw_capsule_name = _proto("PyCapsule_GetName", _vp, _vp)
_raw_capsule_pointer = _proto("PyCapsule_GetPointer", _vp, _vp, _vp)
_err_restore = _proto("PyErr_Restore", None, _vp, _vp, _vp)
# No argtypes: byref arguments are passed without calling a converter, so this call works
# while an exception is pending (every converter call would fail then).
_err_fetch = ctypes.PYFUNCTYPE(None)(("PyErr_Fetch", ctypes.pythonapi))
_FETCHED = (_vp(), _vp(), _vp())
_F0, _F1, _F2 = (ctypes.byref(x) for x in _FETCHED)

# Capsule names must outlive the capsules: module-level, never freed.
_NAME = ctypes.create_string_buffer(b"dltensor")
_NAME_V = ctypes.create_string_buffer(b"dltensor_versioned")
_USED = ctypes.create_string_buffer(b"used_dltensor")
_USED_V = ctypes.create_string_buffer(b"used_dltensor_versioned")
_OURS = (ctypes.addressof(_NAME), ctypes.addressof(_NAME_V))


# --- import ----------------------------------------------------------------------------

@dataclass(frozen=True)
class DLPackInfo:
    """A received capsule, read and validated but not yet taken over."""

    data: int  # address of element (0, ..., 0): data + byte_offset
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements; None = compact row-major
    dtype: DType
    device: tuple[int, int]
    versioned: bool
    readonly: bool
    managed: int  # address of the DLManagedTensor[Versioned]


def request_capsule(obj, stream: int, op: str = "from_dlpack"):
    """Call the producer's ``__dlpack__`` asking it to order itself before ``stream``."""
    method = getattr(obj, "__dlpack__", None)
    if method is None:
        raise ValidationError(f"expected an object with __dlpack__ (a PyTorch, CuPy or JAX "
                              f"GPU array) or a DLPack capsule, got {type(obj).__name__}",
                              op=op)
    try:
        try:
            return method(stream=stream, max_version=DLPACK_VERSION, copy=False)
        except TypeError:  # a producer older than DLPack 1.0 / array API 2023.12
            return method(stream=stream)
    except BufferError as exc:
        raise ValidationError(f"the producer cannot export this array without a copy or "
                              f"at all: {exc}", op=op) from exc


def _capsule_kind(capsule, op: str) -> bool:
    """True for a versioned capsule, False for a legacy one; ValidationError otherwise."""
    if type(capsule).__name__ != "PyCapsule":
        raise ValidationError(f"__dlpack__ returned {type(capsule).__name__}, not a capsule",
                              op=op)
    if _capsule_is_valid(capsule, _NAME_V.value):
        return True
    if _capsule_is_valid(capsule, _NAME.value):
        return False
    if _capsule_is_valid(capsule, _USED_V.value) or _capsule_is_valid(capsule, _USED.value):
        raise ValidationError("this DLPack capsule was consumed already (a capsule can be "
                              "taken once)", op=op)
    raise ValidationError("not a DLPack capsule (its name is neither 'dltensor' nor "
                          "'dltensor_versioned')", op=op)


def parse_capsule(capsule, op: str = "from_dlpack") -> DLPackInfo:
    """Read and validate a capsule without taking it over (see the module doc)."""
    versioned = _capsule_kind(capsule, op)
    address = _capsule_get_pointer(capsule, (_NAME_V if versioned else _NAME).value)
    flags = 0
    if versioned:
        managed = DLManagedTensorVersioned.from_address(address)
        if managed.version.major != DLPACK_VERSION[0]:
            major, minor = managed.version.major, managed.version.minor
            consume(capsule, address, True)  # the header: call the deleter, read nothing else
            raise ValidationError(f"DLPack version {major}.{minor} is not supported "
                                  f"(major version {DLPACK_VERSION[0]} expected)", op=op)
        flags = managed.flags
        dl = managed.dl_tensor
    else:
        dl = DLManagedTensor.from_address(address).dl_tensor
    ndim = dl.ndim
    if ndim < 0 or (ndim and not dl.shape):
        raise ValidationError(f"malformed DLTensor (ndim {ndim}, shape pointer "
                              f"{'set' if dl.shape else 'NULL'})", op=op)
    dtype = from_dl_dtype(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes, op)
    shape = tuple(int(dl.shape[i]) for i in range(ndim))
    if any(s < 0 for s in shape):
        raise ValidationError(f"DLTensor shape {shape} has a negative extent", op=op)
    strides = tuple(int(dl.strides[i]) for i in range(ndim)) if dl.strides else None
    return DLPackInfo(
        data=(dl.data or 0) + int(dl.byte_offset), shape=shape, strides=strides, dtype=dtype,
        device=(int(dl.device.device_type), int(dl.device.device_id)), versioned=versioned,
        readonly=bool(flags & FLAG_READ_ONLY), managed=address)


class ForeignOwner:
    """Keeps a DLPack producer's memory alive. ``__del__`` calls the producer's deleter
    exactly once, after ``stream`` has finished the work enqueued so far on it."""

    __slots__ = ("_managed", "_deleter", "stream", "home", "__weakref__")

    def __init__(self, managed: int, deleter, stream=None, home=None) -> None:
        self._managed = managed
        self._deleter = deleter
        self.stream = stream
        self.home = home  # the runtime owning ``stream`` (see _foreign)

    def __del__(self) -> None:
        deleter, self._deleter = self._deleter, None
        if not deleter:
            return
        managed = self._managed
        try:
            from ._foreign import release_when_idle

            release_when_idle(self.stream, lambda: deleter(managed), self.home)
        except Exception:  # noqa: BLE001 - a finalizer never raises
            pass


def consume(capsule, managed: int, versioned: bool, stream=None,
            home=None) -> ForeignOwner:
    """Take ownership of a parsed capsule: rename it ``used_*``; the owner calls the
    deleter (a NULL deleter means the producer needs no call)."""
    used = _USED_V if versioned else _USED
    if _capsule_set_name(capsule, ctypes.addressof(used)) != 0:
        raise ValidationError("could not mark the DLPack capsule as used", op="from_dlpack")
    struct = DLManagedTensorVersioned if versioned else DLManagedTensor
    return ForeignOwner(managed, struct.from_address(managed).deleter, stream, home)
