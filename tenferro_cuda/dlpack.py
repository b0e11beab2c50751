"""DLPack 1.x: the layouts of ``dlpack.h``, the dtype table, and capsules read on import.

The ctypes Structures mirror the header (a test checks sizes and offsets against it). The
hot paths read and write the same bytes with precompiled ``struct`` layouts instead
(``VERSIONED``, ``LEGACY``: one call per header, one per shape or strides array), which
costs a fraction of a Structure's attribute walk; a test checks that both agree.

Import (``parse_capsule`` then ``consume``, used by ``session.from_dlpack``):
- ``parse_capsule`` validates the name (``dltensor_versioned`` or ``dltensor``; a
  ``used_*`` name means consumed already: ValidationError), the major version, dtype,
  lanes, ndim and shape before anything changes. A rejected capsule stays with its
  producer, whose destructor frees it; only an unknown major version calls the deleter
  (the header is all a consumer may read then).
- ``consume`` renames the capsule ``used_*`` (so nobody can take it twice) and returns a
  ``ForeignOwner`` whose ``__del__`` calls the producer's deleter exactly once, when our
  stream has finished the work enqueued so far (``_foreign.release_when_idle``).
- ``byte_offset`` is added to ``data``; the flags are kept (``READ_ONLY`` makes the
  adopted tensor read-only: ``shapes/aliasing.check_writable``).
"""

from __future__ import annotations

import ctypes
import enum
import struct
import sys
from typing import NamedTuple

from .authority import Authority
from .dtypes import DType
from .errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from .shapes import SIZE_LIMIT
from .shapes.views import check_extent, signed_strides

__all__ = ["DLPACK_VERSION", "FLAG_READ_ONLY", "FLAG_IS_COPIED", "MAX_NDIM", "DLDeviceType",
           "DLDataTypeCode", "DLPackVersion", "DLDevice", "DLDataType", "DLTensor",
           "DLManagedTensor", "DLManagedTensorVersioned", "VERSIONED", "LEGACY", "to_dl_dtype",
           "from_dl_dtype", "check_device", "parse_capsule", "consume", "ForeignOwner",
           "DLPackInfo", "CAPSULE_TYPE", "ints_at", "read_capsule", "MEMORY",
           "dl_code_bits", "deleter_function", "release_function"]

DLPACK_VERSION = (1, 1)
FLAG_READ_ONLY = 1 << 0  # read_capsule tests the bit as ``flags & 1``
FLAG_IS_COPIED = 1 << 1
MAX_NDIM = 64  # numpy's limit; a larger ndim is a malformed header, not a real array


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


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# DLTensor: data, device (type, id), ndim, dtype (code, bits, lanes), shape, strides,
# byte_offset. Little-endian with the header's natural alignment (no padding needed).
TENSOR_LAYOUT = "QiiiBBHQQQ"
# version (major, minor), manager_ctx, deleter, flags, DLTensor
VERSIONED = struct.Struct("<IIQQQ" + TENSOR_LAYOUT)
# DLTensor, manager_ctx, deleter
LEGACY = struct.Struct("<" + TENSOR_LAYOUT + "QQ")
_INTS = [struct.Struct(f"<{n}q") for n in range(MAX_NDIM + 1)]
# The process's memory as one read-only buffer: ``layout.unpack_from(MEMORY, address)``
# reads a header in one call, without making a ctypes object per read (which would cost
# more than the read). Like any ctypes read, the address must be valid.
MEMORY = memoryview((ctypes.c_char * sys.maxsize).from_address(0)).toreadonly()


def ints_at(address: int, n: int) -> tuple[int, ...]:
    """The ``n`` int64 values stored at ``address`` (n <= MAX_NDIM)."""
    return _INTS[n].unpack_from(MEMORY, address)


# --- dtypes and devices ----------------------------------------------------------------

_C = DLDataTypeCode
_TO_DL: dict[DType, tuple[int, int]] = {
    DType.BOOL: (_C.kDLBool, 8), DType.INT8: (_C.kDLInt, 8), DType.UINT8: (_C.kDLUInt, 8),
    DType.INT16: (_C.kDLInt, 16), DType.UINT16: (_C.kDLUInt, 16),
    DType.INT32: (_C.kDLInt, 32), DType.UINT32: (_C.kDLUInt, 32),
    DType.INT64: (_C.kDLInt, 64), DType.UINT64: (_C.kDLUInt, 64),
    DType.FLOAT16: (_C.kDLFloat, 16), DType.BFLOAT16: (_C.kDLBfloat, 16),
    DType.FLOAT32: (_C.kDLFloat, 32), DType.FLOAT64: (_C.kDLFloat, 64),
    DType.COMPLEX64: (_C.kDLComplex, 64), DType.COMPLEX128: (_C.kDLComplex, 128),
}
# (code, bits, lanes) -> DType, with plain ints as keys (what the struct reads give)
_FROM_DL = {(int(c), b, 1): d for d, (c, b) in _TO_DL.items()}
_CODE_BITS = {d: (int(c), b) for d, (c, b) in _TO_DL.items()}  # (what each export packs)


def to_dl_dtype(dtype: DType) -> DLDataType:
    """The DLDataType of ``dtype`` (lanes 1; bool is kDLBool with 8 bits)."""
    code, bits = _TO_DL[dtype]
    return DLDataType(code, bits, 1)


def dl_code_bits(dtype: DType) -> tuple[int, int]:
    """(code, bits) of ``dtype`` as plain ints (lanes are 1)."""
    return _CODE_BITS[dtype]


def from_dl_dtype(code: int, bits: int, lanes: int, op: str = "from_dlpack") -> DType:
    """The DType of a DLDataType; UnsupportedDTypeError for anything outside our 15."""
    dtype = _FROM_DL.get((int(code), int(bits), int(lanes)))
    if dtype is None:
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
    if dev_type == DLDeviceType.kDLCUDA and dev_id == ordinal:
        return
    if dev_type in _HOST_DEVICES:
        raise ValidationError(
            f"the array lives in host memory ({_device_name(dev_type)}); {op} adopts GPU "
            f"memory only: copy host data with session.upload_host_tensor(array)", op=op)
    if dev_type == DLDeviceType.kDLCUDAManaged:
        return  # managed memory reports device_id 0 and is usable from every device
    if dev_type != DLDeviceType.kDLCUDA:
        raise ValidationError(f"the array is on a {_device_name(dev_type)} device, not a "
                              f"CUDA device", op=op)
    raise RuntimeStateError(f"the array is on CUDA device {dev_id}; this session runs "
                            f"on CUDA device {ordinal}", op=op)


# --- Python C-API entry points (private prototypes; ctypes.pythonapi is left untouched) --

def _proto(name: str, restype, *argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_vp = ctypes.c_void_p
_capsule_new = _proto("PyCapsule_New", ctypes.py_object, _vp, _vp, _vp)
_capsule_get_pointer = _proto("PyCapsule_GetPointer", _vp, ctypes.py_object, ctypes.c_char_p)
_capsule_get_name = _proto("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_capsule_set_name = _proto("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, _vp)
_capsule_name_address = _proto("PyCapsule_GetName", _vp, ctypes.py_object)
# Raises the exception pending in the interpreter, if any: ``PyErr_Occurred`` called as
# the Python API, after which ctypes raises what is pending (and so clears it). No
# arguments and no result: nothing is converted, so the call works while an exception is
# pending (any converter call would fail then).
_raise_pending = ctypes.PYFUNCTYPE(None)(("PyErr_Occurred", ctypes.pythonapi))

# Capsule names must outlive the capsules: module-level, never freed.
_NAME = ctypes.create_string_buffer(b"dltensor")
_NAME_V = ctypes.create_string_buffer(b"dltensor_versioned")
_USED = ctypes.create_string_buffer(b"used_dltensor")
_USED_V = ctypes.create_string_buffer(b"used_dltensor_versioned")
_USED_ADDRESS = (ctypes.addressof(_USED), ctypes.addressof(_USED_V))
_NAME_B, _NAME_V_B = _NAME.value, _NAME_V.value
CAPSULE_TYPE = type(_capsule_new(ctypes.addressof(_NAME), ctypes.addressof(_NAME), None))


# --- import ----------------------------------------------------------------------------

class DLPackInfo(NamedTuple):
    """A received capsule, read and validated but not yet taken over."""

    data: int  # address of element (0, ..., 0): data + byte_offset
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements; None = compact row-major
    dtype: DType
    device: tuple[int, int]
    versioned: bool
    readonly: bool
    managed: int  # address of the DLManagedTensor[Versioned]
    flags: int = 0
    deleter: int = 0  # address of the producer's deleter (0: none)


def _unusable(capsule, op: str) -> ValidationError:
    """The error for a capsule with neither DLPack name (consumed, or not DLPack)."""
    if type(capsule) is not CAPSULE_TYPE:
        return ValidationError(f"__dlpack__ returned {type(capsule).__name__}, not a "
                               f"capsule", op=op)
    name = _capsule_get_name(capsule)
    if name in (_USED.value, _USED_V.value):
        return ValidationError("this DLPack capsule was consumed already (a capsule can be "
                               "taken once)", op=op)
    return ValidationError(f"not a DLPack capsule (its name is {name!r}, neither "
                           f"'dltensor' nor 'dltensor_versioned')", op=op)


def read_capsule(capsule, op: str = "from_dlpack") -> tuple:
    """``parse_capsule`` as a plain tuple, in ``DLPackInfo``'s field order (the hot path)."""
    if type(capsule) is not CAPSULE_TYPE:
        raise _unusable(capsule, op)
    try:
        address = _capsule_get_pointer(capsule, _NAME_V_B)
    except ValueError:  # not "dltensor_versioned" (PyCapsule_GetPointer sets ValueError)
        address = 0
    if address:
        versioned = True
        (major, minor, _, deleter, flags, data, dev_type, dev_id, ndim, code, bits, lanes,
         shape_p, strides_p, offset) = VERSIONED.unpack_from(MEMORY, address)
        if major != 1:
            consume(capsule, address, True)  # the header: call the deleter, read nothing else
            raise ValidationError(f"DLPack version {major}.{minor} is not supported "
                                  f"(major version {DLPACK_VERSION[0]} expected)", op=op)
    else:
        try:
            address = _capsule_get_pointer(capsule, _NAME_B)
        except ValueError:
            raise _unusable(capsule, op) from None
        versioned, flags = False, 0
        (data, dev_type, dev_id, ndim, code, bits, lanes, shape_p, strides_p, offset, _,
         deleter) = LEGACY.unpack_from(MEMORY, address)
    dtype = _FROM_DL.get((code, bits, lanes))
    if dtype is None:
        dtype = from_dl_dtype(code, bits, lanes, op)  # raises the precise error
    if ndim:
        if not 0 < ndim <= MAX_NDIM or not shape_p:
            raise ValidationError(f"malformed DLTensor (ndim {ndim}, shape pointer "
                                  f"{'set' if shape_p else 'NULL'}; ndim must be in "
                                  f"[0, {MAX_NDIM}])", op=op)
        layout = _INTS[ndim]
        shape = layout.unpack_from(MEMORY, shape_p)
        if min(shape) < 0:
            raise ValidationError(f"DLTensor shape {shape} has a negative extent", op=op)
        strides = layout.unpack_from(MEMORY, strides_p) if strides_p else None
        if strides is not None and max(strides) * dtype.itemsize >= SIZE_LIMIT:  # (2**63)
            strides = signed_strides(strides, dtype.itemsize)
    else:
        shape, strides = (), None
    check_extent(data + offset, shape, strides, dtype.itemsize, op)
    return (data + offset, shape, strides, dtype, (dev_type, dev_id), versioned,
            flags & 1 != 0, address, flags, deleter)


def parse_capsule(capsule, op: str = "from_dlpack") -> DLPackInfo:
    """Read and validate a capsule without taking it over (see the module doc)."""
    return DLPackInfo(*read_capsule(capsule, op))


_DELETERS: dict[int, object] = {}  # deleter address -> its ctypes function (a few per producer)


def deleter_function(address: int):
    """The callable ctypes function of a deleter address (None for NULL)."""
    if not address:
        return None
    fn = _DELETERS.get(address)
    if fn is None:
        if len(_DELETERS) >= 256:
            _DELETERS.clear()
        fn = _DELETERS[address] = DELETER(address)
    return fn


_release = None  # _foreign.release_when_idle, bound on first use (it imports the driver)


def release_function():
    """``_foreign.release_when_idle`` (imported on first use: it imports the driver)."""
    global _release
    if _release is None:
        from ._foreign import release_when_idle

        _release = release_when_idle
    return _release


class ForeignOwner(Authority):
    """Keeps a DLPack producer's memory alive. ``__del__`` calls the producer's deleter
    exactly once, after ``stream`` has finished the work enqueued so far on it."""

    __slots__ = ("_managed", "_deleter", "stream", "home", "readonly", "__weakref__")

    def __init__(self, managed: int, deleter, stream=None, home=None,
                 readonly: bool = False) -> None:
        self._managed = managed
        self._deleter = deleter
        self.stream = stream
        self.home = home  # the runtime owning ``stream`` (see _foreign)
        self.readonly = readonly  # the producer marked the memory read-only

    def __del__(self) -> None:
        deleter, self._deleter = self._deleter, None
        if not deleter:
            return
        try:
            (_release or release_function())(self.stream, deleter, self._managed, self.home)
        except Exception:  # noqa: BLE001 - a finalizer never raises
            pass


def consume(capsule, managed: int | DLPackInfo, versioned: bool | None = None, stream=None,
            home=None, deleter: int | None = None, readonly: bool = False) -> ForeignOwner:
    """Take ownership of a parsed capsule: rename it ``used_*``; the owner calls the
    deleter (a NULL deleter means the producer needs no call). ``managed`` is the
    ``DLPackInfo``, or the address of the managed tensor (with ``versioned``, and the
    ``deleter`` address when the caller has read it)."""
    if type(managed) is int and deleter is not None:  # the hot path (from_dlpack)
        address = managed
    elif isinstance(managed, DLPackInfo):
        address, versioned, readonly, deleter = (managed.managed, managed.versioned,
                                                 managed.readonly, managed.deleter)
    else:
        address = managed
        header = (VERSIONED if versioned else LEGACY).unpack_from(MEMORY, address)
        deleter = header[3] if versioned else header[-1]
    if _capsule_set_name(capsule, _USED_ADDRESS[1 if versioned else 0]) != 0:
        raise ValidationError("could not mark the DLPack capsule as used", op="from_dlpack")
    function = _DELETERS.get(deleter) if deleter else None  # type: ignore[arg-type]
    if function is None and deleter:
        function = deleter_function(deleter)  # type: ignore[arg-type]
    return ForeignOwner(address, function, stream, home, readonly)
