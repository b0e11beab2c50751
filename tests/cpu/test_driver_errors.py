"""CUresult -> tenferro error mapping in tenferro_cuda._driver (pure functions only).

Importing cuda.bindings.driver works without a GPU; calling a driver function does not,
so only ``error_for``, ``status_name`` and ``check`` (on given result tuples) are tested.
"""

from __future__ import annotations

import pickle

import pytest
from cuda.bindings import driver as cu

from tenferro_cuda import _driver
from tenferro_cuda.errors import (
    BackendSourceError,
    ContextLostError,
    CudaDeviceError,
    CudaError,
    OutOfMemoryError,
    TenferroError,
)

STICKY = {
    700: "CUDA_ERROR_ILLEGAL_ADDRESS",
    702: "CUDA_ERROR_LAUNCH_TIMEOUT",
    714: "CUDA_ERROR_HARDWARE_STACK_ERROR",
    715: "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    716: "CUDA_ERROR_MISALIGNED_ADDRESS",
    717: "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    718: "CUDA_ERROR_INVALID_PC",
    719: "CUDA_ERROR_LAUNCH_FAILED",
}
ENVIRONMENT = {
    100: "CUDA_ERROR_NO_DEVICE",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    4: "CUDA_ERROR_DEINITIALIZED",
    46: "CUDA_ERROR_DEVICE_UNAVAILABLE",
    34: "CUDA_ERROR_STUB_LIBRARY",
    101: "CUDA_ERROR_INVALID_DEVICE",
    803: "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
    804: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
}
# (code, expected CUDA_ERROR_* name, expected exact type)
CASES = (
    [(2, "CUDA_ERROR_OUT_OF_MEMORY", OutOfMemoryError)]
    + [(code, name, ContextLostError) for code, name in STICKY.items()]
    + [(code, name, CudaDeviceError) for code, name in ENVIRONMENT.items()]
    + [
        (1, "CUDA_ERROR_INVALID_VALUE", BackendSourceError),
        (200, "CUDA_ERROR_INVALID_IMAGE", BackendSourceError),
        (500, "CUDA_ERROR_NOT_FOUND", BackendSourceError),
    ]
)
IDS = [f"{code}-{name}" for code, name, _ in CASES]
API = "cuMemAllocFromPoolAsync"


@pytest.mark.parametrize(("code", "name", "cls"), CASES, ids=IDS)
def test_maps_to_type(code, name, cls):
    err = _driver.error_for(API, code, op="myop")
    assert type(err) is cls
    assert isinstance(err, TenferroError)
    assert err.op == "myop"


@pytest.mark.parametrize(("code", "name", "cls"), CASES, ids=IDS)
def test_message_names_api_and_status(code, name, cls):
    err = _driver.error_for(API, code, op="myop")
    assert API in str(err)
    assert name in str(err)
    assert str(err).startswith("myop: ")


@pytest.mark.parametrize(("code", "name", "cls"), CASES, ids=IDS)
def test_cause_is_cuda_error_with_code(code, name, cls):
    err = _driver.error_for(API, code)
    assert isinstance(err.__cause__, CudaError)
    assert err.__cause__.code == code
    assert err.__cause__.api == API
    assert err.__cause__.name == name


@pytest.mark.parametrize(("code", "name", "cls"), CASES, ids=IDS)
def test_status_name(code, name, cls):
    assert _driver.status_name(code) == name


@pytest.mark.parametrize(("code", "name", "cls"),
                         [c for c in CASES if c[1].startswith("CUDA_ERROR_")],
                         ids=[i for c, i in zip(CASES, IDS, strict=True)
                              if c[1].startswith("CUDA_ERROR_")])
def test_accepts_cuda_result_enum(code, name, cls):
    assert type(_driver.error_for(API, cu.CUresult(code))) is cls


@pytest.mark.parametrize(("code", "name", "cls"), CASES, ids=IDS)
def test_mapped_error_pickles(code, name, cls):
    err = _driver.error_for(API, code, op="myop", nbytes=4096)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert back.op == "myop"
    assert str(back) == str(err)


@pytest.mark.parametrize("code", sorted(STICKY))
def test_sticky_message_says_restart(code):
    err = _driver.error_for("cuStreamSynchronize", code)
    assert "process must restart" in str(err)
    assert not isinstance(err, MemoryError)


@pytest.mark.parametrize("code", sorted(ENVIRONMENT))
def test_environment_errors_are_not_backend_errors(code):
    assert not isinstance(_driver.error_for("cuInit", code), BackendSourceError)


def test_sticky_codes_table():
    assert set(STICKY) == _driver.STICKY_CODES


def test_capture_refusals_are_told_apart():
    """The names of 900-908 are the capture statuses; a refusal is read off the error a
    checked call raises, through its cause, and nothing else reads as one."""
    for code in range(900, 909):
        name = _driver.status_name(code)
        assert "CAPTURE" in name or name == "CUDA_ERROR_CAPTURED_EVENT", name
        assert _driver.refused_by_capture(_driver.error_for("cuStreamQuery", code))
    for code in (0, 1, 400, 600, 700, 899, 909, 999):
        assert not _driver.refused_by_capture(_driver.error_for("cuStreamQuery", code))
    assert not _driver.refused_by_capture(RuntimeError("no cause"))


@pytest.mark.parametrize("nbytes", [0, 1, 1 << 34])
def test_out_of_memory_keeps_requested_bytes(nbytes):
    err = _driver.error_for(API, 2, op="alloc", nbytes=nbytes)
    assert isinstance(err, MemoryError)
    assert err.requested_bytes == nbytes
    assert f"requested {nbytes} bytes" in str(err)
    assert pickle.loads(pickle.dumps(err)).requested_bytes == nbytes


@pytest.mark.parametrize("code", [99999, 12345])
def test_unknown_code(code):
    assert _driver.status_name(code) == f"CUresult({code})"
    err = _driver.error_for(API, code)
    assert type(err) is BackendSourceError
    assert f"CUresult({code})" in str(err)
    assert err.__cause__.code == code


SUCCESS = cu.CUresult.CUDA_SUCCESS
CHECK_OK = [
    ((SUCCESS,), None),
    ((SUCCESS, 7), 7),
    ((SUCCESS, 7, "x"), (7, "x")),
    ((0, 3), 3),
]


@pytest.mark.parametrize(("result", "expected"), CHECK_OK, ids=["none", "one", "two", "int0"])
def test_check_success(result, expected):
    assert _driver.check(result, "cuSomething") == expected


@pytest.mark.parametrize(
    ("status", "cls"),
    [(cu.CUresult.CUDA_ERROR_INVALID_VALUE, BackendSourceError),
     (cu.CUresult.CUDA_ERROR_OUT_OF_MEMORY, OutOfMemoryError),
     (cu.CUresult.CUDA_ERROR_NO_DEVICE, CudaDeviceError)],
    ids=["invalid_value", "oom", "no_device"],
)
def test_check_failure_raises_mapped_error(status, cls):
    with pytest.raises(cls) as info:
        _driver.check((status, None), "cuModuleLoadData", op="load")
    assert type(info.value) is cls
    assert "cuModuleLoadData" in str(info.value)
    assert info.value.op == "load"
    assert isinstance(info.value.__cause__, CudaError)
    assert info.value.__cause__.code == int(status)
