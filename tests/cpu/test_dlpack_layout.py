"""DLPack structs against dlpack.h (v1.1), the dtype/typestr tables, device validation.

Sizes and offsets are those of the C header on an LP64 platform: DLTensor is
{void* data; DLDevice device; int32 ndim; DLDataType dtype; int64* shape; int64* strides;
uint64 byte_offset}, DLManagedTensor appends {void* manager_ctx; deleter}, and
DLManagedTensorVersioned is {DLPackVersion; manager_ctx; deleter; uint64 flags; DLTensor}.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from tenferro_cuda import _driver, _driver_fast, cai, dlpack
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from tenferro_cuda.ops.interop import validate_producer

LAYOUT = [
    ("DLPackVersion", 8, {"major": 0, "minor": 4}),
    ("DLDevice", 8, {"device_type": 0, "device_id": 4}),
    ("DLDataType", 4, {"code": 0, "bits": 1, "lanes": 2}),
    ("DLTensor", 48, {"data": 0, "device": 8, "ndim": 16, "dtype": 20, "shape": 24,
                      "strides": 32, "byte_offset": 40}),
    ("DLManagedTensor", 64, {"dl_tensor": 0, "manager_ctx": 48, "deleter": 56}),
    ("DLManagedTensorVersioned", 80, {"version": 0, "manager_ctx": 8, "deleter": 16,
                                      "flags": 24, "dl_tensor": 32}),
]


@pytest.mark.parametrize("name,size,offsets", LAYOUT, ids=[row[0] for row in LAYOUT])
def test_struct_layout_matches_header(name, size, offsets):
    struct = getattr(dlpack, name)
    assert ctypes.sizeof(struct) == size
    assert {f: getattr(struct, f).offset for f in offsets} == offsets
    assert [f[0] for f in struct._fields_] == list(offsets)


def test_header_constants():
    assert dlpack.DLPACK_VERSION[0] == 1
    assert (dlpack.FLAG_READ_ONLY, dlpack.FLAG_IS_COPIED) == (1, 2)
    D = dlpack.DLDeviceType
    assert (D.kDLCPU, D.kDLCUDA, D.kDLCUDAHost, D.kDLROCM, D.kDLCUDAManaged) == (1, 2, 3, 10, 13)
    C = dlpack.DLDataTypeCode
    assert (C.kDLInt, C.kDLUInt, C.kDLFloat, C.kDLBfloat, C.kDLComplex, C.kDLBool) == (
        0, 1, 2, 4, 5, 6)


# (dtype, DLPack code, bits, CAI typestr)
DTYPE_TABLE = [
    (DType.BOOL, 6, 8, "|b1"), (DType.INT8, 0, 8, "|i1"), (DType.UINT8, 1, 8, "|u1"),
    (DType.INT16, 0, 16, "<i2"), (DType.UINT16, 1, 16, "<u2"), (DType.INT32, 0, 32, "<i4"),
    (DType.UINT32, 1, 32, "<u4"), (DType.INT64, 0, 64, "<i8"), (DType.UINT64, 1, 64, "<u8"),
    (DType.FLOAT16, 2, 16, "<f2"),
    (DType.BFLOAT16, 4, 16, None), (DType.FLOAT32, 2, 32, "<f4"),
    (DType.FLOAT64, 2, 64, "<f8"), (DType.COMPLEX64, 5, 64, "<c8"),
    (DType.COMPLEX128, 5, 128, "<c16"),
]
IDS = [row[0].value for row in DTYPE_TABLE]


def test_dtype_table_covers_all_dtypes():
    assert [row[0] for row in DTYPE_TABLE] == list(ALL_DTYPES)


@pytest.mark.parametrize("dtype,code,bits,ts", DTYPE_TABLE, ids=IDS)
def test_dl_dtype_round_trip(dtype, code, bits, ts):
    dl = dlpack.to_dl_dtype(dtype)
    assert (dl.code, dl.bits, dl.lanes) == (code, bits, 1)
    assert bits == 8 * dtype.itemsize
    assert dlpack.from_dl_dtype(code, bits, 1) is dtype


@pytest.mark.parametrize("dtype,code,bits,ts", DTYPE_TABLE, ids=IDS)
def test_typestr_round_trip(dtype, code, bits, ts):
    if ts is None:
        with pytest.raises(UnsupportedDTypeError, match="DLPack"):
            cai.typestr(dtype)
        return
    assert cai.typestr(dtype) == ts
    assert np.dtype(ts) == dtype.numpy  # the numpy spelling of the same type
    assert cai.dtype_from_typestr(ts) is dtype
    assert cai.dtype_from_typestr("=" + ts[1:]) is dtype


BAD_DL = [(2, 32, 4), (0, 128, 1), (1, 1, 1), (1, 16, 2), (3, 64, 1), (8, 8, 1), (6, 1, 1),
          (4, 32, 1), (5, 32, 1), (99, 8, 1)]


@pytest.mark.parametrize("code,bits,lanes", BAD_DL, ids=[f"{c}-{b}-{n}" for c, b, n in BAD_DL])
def test_unsupported_dl_dtypes(code, bits, lanes):
    with pytest.raises(UnsupportedDTypeError, match="lanes must be 1"):
        dlpack.from_dl_dtype(code, bits, lanes)


BAD_TYPESTR = [("<i16", UnsupportedDTypeError), (">f4", UnsupportedDTypeError),
               ("<V2", UnsupportedDTypeError), (">u4", UnsupportedDTypeError),
               ("<u16", UnsupportedDTypeError),
               ("f4", ValidationError), ("<f", ValidationError), (4, ValidationError),
               ("", ValidationError)]


@pytest.mark.parametrize("text,error", BAD_TYPESTR, ids=[repr(t) for t, _ in BAD_TYPESTR])
def test_bad_typestr(text, error):
    with pytest.raises(error):
        cai.dtype_from_typestr(text)


def test_big_endian_single_byte_is_fine():
    assert cai.dtype_from_typestr(">i1") is DType.INT8


# --- devices -----------------------------------------------------------------------------

DEVICES = [
    ((1, 0), ValidationError, "upload_host_tensor"),
    ((3, 0), ValidationError, "upload_host_tensor"),
    ((11, 0), ValidationError, "upload_host_tensor"),
    ((10, 0), ValidationError, "kDLROCM"),
    ((4, 0), ValidationError, "kDLOpenCL"),
    ((2, 1), RuntimeStateError, "CUDA device 1"),
    ((2, 0), None, ""),
    ((13, 0), None, ""),
    ("cuda", ValidationError, "device_type, device_id"),
]


@pytest.mark.parametrize("device,error,text", DEVICES, ids=[repr(d[0]) for d in DEVICES])
def test_check_device(device, error, text):
    if error is None:
        dlpack.check_device(device, 0)
        return
    with pytest.raises(error, match=text) as info:
        dlpack.check_device(device, 0)
    assert info.value.op == "from_dlpack"


@pytest.fixture
def no_cuda(monkeypatch):
    """Every driver entry point the interop code could reach fails the test."""
    def boom(*args, **kwargs):
        raise AssertionError("a CUDA call was made")

    for name in ("init", "event_create", "event_record", "stream_wait_event",
                 "stream_query", "ctx_get_current"):
        monkeypatch.setattr(_driver, name, boom)
    for name in ("launch", "current", "order", "pointer_ordinal", "stream_query"):
        monkeypatch.setattr(_driver_fast, name, boom)


class _CpuProducer:
    """A DLPack producer claiming a device, never asked for its capsule here."""

    def __init__(self, device):
        self.device = device

    def __dlpack__(self, **kwargs):
        raise AssertionError("__dlpack__ must not be called before validation passes")

    def __dlpack_device__(self):
        return self.device


PRODUCERS = [
    ("numpy", np.arange(6.0), ValidationError, "upload_host_tensor"),
    ("numpy-2d", np.ones((2, 3), np.float32)[:, ::2], ValidationError, "host memory"),
    ("cuda-host", _CpuProducer((3, 0)), ValidationError, "kDLCUDAHost"),
    ("other-gpu", _CpuProducer((2, 3)), RuntimeStateError, "CUDA device 3"),
    ("list", [1, 2, 3], ValidationError, "__dlpack__"),
    ("scalar", 3.0, ValidationError, "__dlpack__"),
]


@pytest.mark.parametrize("obj,error,text", [p[1:] for p in PRODUCERS],
                         ids=[p[0] for p in PRODUCERS])
def test_producer_rejected_before_any_cuda_call(no_cuda, obj, error, text):
    with pytest.raises(error, match=text):
        validate_producer(obj, 0)


def test_producer_on_our_device_passes(no_cuda):
    validate_producer(_CpuProducer((2, 0)), 0)
