"""The CUDA Array Interface (version 3): export and import helpers.

Export (``export_interface``, behind ``Tensor.__cuda_array_interface__``):
- ``data`` is (address of element (0, ..., 0), read_only); 0 for an empty tensor;
  read_only is True only for memory adopted read-only.
- ``strides`` is None for compact row-major tensors, else byte strides (maybe negative).
- ``stream`` is the handle (an int) of the stream the tensor's work is enqueued on; the
  consumer orders itself after it (CAI v3). No lifetime management: the consumer keeps a
  reference to the exporting object, as the protocol requires.
- bfloat16 has no typestr in the protocol: ``UnsupportedDTypeError`` (use DLPack). Host
  tensors have no such attribute (``AttributeError``, so ``hasattr`` answers False).

Import (``parse_interface``, used by ``session.from_cuda_array_interface``): validates the
dict (version, shape, typestr, data, strides, mask, stream) before anything happens and
returns a ``CAIInfo`` with strides converted to elements (byte strides that are not a
multiple of the item size raise ValidationError). The usual dict (ints, a known typestr)
is read by one pass of type checks; anything else takes the checks that name the fault.
``data[1]`` (read_only) must be a bool (or ``np.bool_``), not merely truthy.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from . import dlpack as _dl
from .authority import Authority
from .dlpack import release_function
from .dtypes import DType
from .errors import RuntimeStateError, UnsupportedDTypeError, UnsupportedError, ValidationError
from .shapes import ADDRESS_LIMIT
from .shapes.views import check_extent
from .tensor import install_export, is_row_major

__all__ = ["typestr", "dtype_from_typestr", "export_interface", "parse_interface", "CAIInfo",
           "interface_of", "HeldProducer"]

_TYPESTR: dict[DType, str] = {
    DType.BOOL: "|b1", DType.INT8: "|i1", DType.UINT8: "|u1", DType.INT16: "<i2",
    DType.UINT16: "<u2", DType.INT32: "<i4", DType.UINT32: "<u4", DType.INT64: "<i8",
    DType.UINT64: "<u8", DType.FLOAT16: "<f2", DType.FLOAT32: "<f4", DType.FLOAT64: "<f8",
    DType.COMPLEX64: "<c8", DType.COMPLEX128: "<c16",
}
_FROM_KIND = {(s[1], int(s[2:])): d for d, s in _TYPESTR.items()}
_TYPESTR_RE = re.compile(r"^([<>|=])([a-zA-Z])(\d+)$")
# every spelling the regular path accepts, looked up directly (">i1" too: one byte)
_KNOWN = {o + s[1:]: d for d, s in _TYPESTR.items() for o in "<|="}
_KNOWN.update({">" + s[1:]: d for d, s in _TYPESTR.items() if d.itemsize == 1})


def typestr(dtype: DType, op: str = "__cuda_array_interface__") -> str:
    """The CAI/numpy typestr of ``dtype``; bfloat16 has none (UnsupportedDTypeError)."""
    try:
        return _TYPESTR[dtype]
    except KeyError:
        raise UnsupportedDTypeError(
            f"{dtype.value} has no typestr in the CUDA Array Interface; exchange bfloat16 "
            f"tensors through DLPack (__dlpack__ / session.from_dlpack)", op=op) from None


def dtype_from_typestr(text: object, op: str = "from_cuda_array_interface") -> DType:
    """The DType of a typestr such as ``"<f4"`` (native little-endian or ``|``)."""
    match = _TYPESTR_RE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValidationError(f"typestr must look like '<f4' (got {text!r})", op=op)
    order, kind, size = match.group(1), match.group(2), int(match.group(3))
    dtype = _FROM_KIND.get((kind, size))
    if dtype is None:
        raise UnsupportedDTypeError(f"typestr {text!r} is not one of "
                                    f"{', '.join(_TYPESTR.values())}", op=op)
    if order == ">" and size > 1:
        raise UnsupportedDTypeError(f"typestr {text!r} is big-endian; the GPU data is "
                                    f"little-endian", op=op)
    return dtype


_f = None  # the _foreign module, bound on first use (it imports the driver)


def export_interface(tensor) -> dict:
    """``__cuda_array_interface__`` (version 3) of a device tensor or view."""
    global _f
    op = "__cuda_array_interface__"
    buf = tensor.base.buffer
    if buf is None:
        raise AttributeError("a host tensor has no __cuda_array_interface__ "
                             "(tensor.numpy() gives the host data)")
    if buf.home is None:
        raise RuntimeStateError("a reclaimed tensor has no device memory to share", op=op)
    dtype = tensor.dtype
    ts = _TYPESTR.get(dtype) or typestr(dtype, op)
    if _f is None:
        from . import _foreign

        _f = _foreign
    _f.export_context(buf, op)  # enqueue pending work of this thread before the stream
    shape, strides = tensor.shape, tensor.strides
    empty = 0 in shape
    owner = buf.owner
    return {
        "shape": shape,
        "typestr": ts,
        "descr": [("", ts)],
        "data": (0 if empty else buf.ptr + tensor.offset * dtype.itemsize,
                 owner is not None and getattr(owner, "readonly", False) is True),
        "strides": None if empty or is_row_major(shape, strides) else tuple(
            s * dtype.itemsize for s in strides),
        "version": 3,
        "stream": int(buf.origin.stream),
    }


class CAIInfo(NamedTuple):
    """A validated interface dict."""

    data: int  # address of element (0, ..., 0)
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements; None = compact row-major
    dtype: DType
    readonly: bool
    stream: int | None  # None: no synchronization asked


def interface_of(obj, op: str = "from_cuda_array_interface") -> dict:
    """The interface dict of ``obj`` (an object exposing it, or the dict itself)."""
    if isinstance(obj, dict):
        return obj
    try:
        iface = obj.__cuda_array_interface__
    except AttributeError:
        raise ValidationError(f"expected an object with __cuda_array_interface__ or its "
                              f"dict, got {type(obj).__name__}; host arrays are copied "
                              f"with session.upload_host_tensor(array)", op=op) from None
    if not isinstance(iface, dict):
        raise ValidationError(f"__cuda_array_interface__ must be a dict (got "
                              f"{type(iface).__name__})", op=op)
    return iface


def _int_tuple(value, what: str, op: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValidationError(f"{what} must be a tuple of ints (got {value!r})", op=op)
    return tuple(int(v) for v in value)


def _field(iface: dict, key: str, op: str):
    if key not in iface:
        raise ValidationError(f"the interface dict has no {key!r}", op=op)
    return iface[key]


def _stream(iface: dict, version: int, op: str) -> int | None:
    value = iface.get("stream") if version >= 3 else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < ADDRESS_LIMIT:
        raise ValidationError(f"stream must be None or a CUDA stream handle (got {value!r})",
                              op=op)
    return value or 1  # 0 is disallowed as ambiguous: take it as the legacy default stream


def _plain_ints(values) -> bool:
    for v in values:
        if type(v) is not int:
            return False
    return True


_info = tuple.__new__  # CAIInfo's fields in order, without its generated __new__


def parse_interface(iface: dict, op: str = "from_cuda_array_interface") -> CAIInfo:
    """Validate an interface dict and convert its strides to elements."""
    get = iface.get
    version, shape, data, ts = get("version"), get("shape"), get("data"), get("typestr")
    dtype = _KNOWN.get(ts) if type(ts) is str else None
    if (type(version) is int and version >= 0 and type(shape) is tuple and dtype is not None
            and type(data) is tuple and len(data) == 2 and get("mask") is None):
        ptr, readonly = data
        for n in shape:
            if type(n) is not int or n < 0:
                break
        else:
            raw = get("strides")
            stream = get("stream") if version >= 3 else None
            if type(ptr) is int and 0 <= ptr < ADDRESS_LIMIT and type(readonly) is bool and (
                    stream is None or type(stream) is int and 0 < stream < ADDRESS_LIMIT):
                if raw is None:
                    strides = None
                elif type(raw) is tuple and len(raw) == len(shape) and _plain_ints(raw):
                    strides = _element_strides(raw, dtype, op)
                else:
                    return _parse_slowly(iface, op)
                check_extent(ptr, shape, strides, dtype.itemsize, op)
                return _info(CAIInfo, (ptr, shape, strides, dtype, readonly, stream))
    return _parse_slowly(iface, op)


def _element_strides(byte_strides: tuple[int, ...], dtype: DType, op: str) -> tuple[int, ...]:
    item = dtype.itemsize
    if any(s % item for s in byte_strides):
        raise ValidationError(f"byte strides {byte_strides} are not multiples of the "
                              f"item size {item} of {dtype.value}", op=op)
    return tuple(s // item for s in byte_strides)


def _parse_slowly(iface: dict, op: str) -> CAIInfo:
    """``parse_interface`` for dicts off the usual path: every check, in order."""
    version = _field(iface, "version", op)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise ValidationError(f"version must be an int >= 0 (got {version!r})", op=op)
    shape = _int_tuple(_field(iface, "shape", op), "shape", op)
    if any(s < 0 for s in shape):
        raise ValidationError(f"shape {shape} has a negative extent", op=op)
    dtype = dtype_from_typestr(_field(iface, "typestr", op), op)
    data = _field(iface, "data", op)
    if (not isinstance(data, (tuple, list)) or len(data) != 2
            or isinstance(data[0], bool) or not isinstance(data[0], int)
            or not 0 <= data[0] < ADDRESS_LIMIT):
        raise ValidationError(f"data must be (pointer, read_only) (got {data!r})", op=op)
    if not isinstance(data[1], (bool, np.bool_)):  # not anything truthy: "False", None, 2
        raise ValidationError(f"data[1] (read_only) must be a bool (got {data[1]!r})", op=op)
    if iface.get("mask") is not None:
        raise UnsupportedError("masked arrays (a 'mask' entry) cannot be adopted", op=op)
    raw = iface.get("strides")
    strides = None
    if raw is not None:
        byte_strides = _int_tuple(raw, "strides", op)
        if len(byte_strides) != len(shape):
            raise ValidationError(f"{len(shape)} extents but {len(byte_strides)} strides",
                                  op=op, kind="rank_mismatch")
        strides = _element_strides(byte_strides, dtype, op)
    check_extent(int(data[0]), shape, strides, dtype.itemsize, op)
    return CAIInfo(int(data[0]), shape, strides, dtype, bool(data[1]),
                   _stream(iface, version, op))


class HeldProducer(Authority):
    """Keeps the object that exposed a CUDA Array Interface alive while its memory is
    adopted; dropped only once ``stream`` has finished the work enqueued so far."""

    __slots__ = ("_obj", "stream", "home", "readonly", "__weakref__")

    def __init__(self, obj: object, stream=None, home=None, readonly: bool = False) -> None:
        self._obj = obj
        self.stream = stream
        self.home = home  # the runtime owning ``stream`` (see _foreign)
        self.readonly = readonly  # the interface said data[1] = True

    def __del__(self) -> None:
        obj, self._obj = self._obj, None
        if obj is None:
            return
        try:
            # (no function: the producer goes with the release's last reference to it)
            (_dl._release or release_function())(self.stream, None, obj, self.home)
        except Exception:  # noqa: BLE001 - a finalizer never raises
            pass


install_export(interface=export_interface)
