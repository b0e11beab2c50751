"""tenferro_cuda._cublas on the CPU: loading (typed errors naming what is missing, the
failure remembered), the import fallback when nvmath's package ``__init__`` cannot run,
status mapping, and the ABI constants against the bindings' enums."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

from tenferro_cuda import _cublas
from tenferro_cuda.errors import BackendSourceError, CublasError, OutOfMemoryError

HAS_NVMATH = importlib.util.find_spec("nvmath") is not None
needs_nvmath = pytest.mark.skipif(not HAS_NVMATH, reason="nvmath-python is not installed")


@pytest.fixture
def fresh():
    _cublas._reset_for_tests()
    yield _cublas
    _cublas._reset_for_tests()


def _run(code: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_load_in_this_environment(gpu_present):
    """Without a GPU host's libraries, load() raises BackendSourceError naming the missing
    piece; on a GPU host (nvidia-cublas installed) it succeeds. Also the capability."""
    out = _run("""
        import json
        from tenferro_cuda import _cublas, capabilities
        from tenferro_cuda.errors import BackendSourceError
        try:
            _cublas.load()
            res = {"ok": True, "version": _cublas.version()}
        except BackendSourceError as exc:
            res = {"ok": False, "type": type(exc).__name__, "msg": str(exc)}
        res["capability"] = capabilities._cublas_loadable()
        print(json.dumps(res))
    """)
    assert out["capability"] == out["ok"]
    if gpu_present:
        assert out["ok"] and tuple(out["version"]) >= (12, 5, 0)
    else:
        assert not out["ok"] and out["type"] == "BackendSourceError"
        assert "libcublas.so.13" in out["msg"] or "nvmath-python" in out["msg"], out["msg"]


def test_missing_nvmath_is_named(fresh, monkeypatch):
    monkeypatch.setattr(fresh, "_PACKAGE", "tenferro_no_such_package")
    with pytest.raises(BackendSourceError, match="nvmath-python not found") as info:
        fresh.load()
    assert isinstance(info.value.__cause__, ImportError)


@needs_nvmath
def test_missing_library_is_named(fresh, monkeypatch):
    import cuda.pathfinder as pathfinder

    fresh._import_bindings()  # nvmath's own import probes other libraries: not counted
    calls = []

    def not_found(name):
        calls.append(name)
        raise pathfinder.DynamicLibNotFoundError(f'Failure finding "{name}"')

    monkeypatch.setattr(pathfinder, "load_nvidia_dynamic_lib", not_found)
    with pytest.raises(BackendSourceError, match=r"libcublas\.so\.13 .*not found") as first:
        fresh.load()
    assert calls == ["cublas"]
    with pytest.raises(BackendSourceError) as second:  # remembered: no second probe
        fresh.load()
    assert calls == ["cublas"]
    # the same error again, a fresh copy each time (a remembered exception that is raised
    # again would keep every frame it passed through alive: the caller's tensors)
    assert second.value is not first.value and str(second.value) == str(first.value)
    assert second.value.op == first.value.op
    with pytest.raises(BackendSourceError):
        fresh.version()


@needs_nvmath
def test_library_that_fails_to_load_is_named(fresh, monkeypatch):
    import cuda.pathfinder as pathfinder

    lib = fresh._import_bindings()
    monkeypatch.setattr(pathfinder, "load_nvidia_dynamic_lib", lambda name: None)

    def broken(kind):
        raise RuntimeError("CUDA driver is not found")

    monkeypatch.setattr(lib, "get_property", broken)
    with pytest.raises(BackendSourceError,
                       match=r"libcublas\.so\.13 could not be loaded.*driver is not found"):
        fresh.load()


@needs_nvmath
def test_bindings_import_without_nvmath_package_init():
    """When nvmath's package __init__ fails on a dependency we do not need (cuda.core),
    the binding module is imported on its own."""
    out = _run("""
        import json, sys
        sys.modules["cuda.core"] = None  # as on a host without cuda-core
        from tenferro_cuda import _cublas
        lib = _cublas._import_bindings()
        print(json.dumps({"gemm": hasattr(lib, "gemm_strided_batched_ex"),
                          "grouped": hasattr(lib, "gemm_grouped_batched_ex"),
                          "fft": "nvmath.fft" in sys.modules}))
    """)
    assert out == {"gemm": True, "grouped": True, "fft": False}


@pytest.mark.parametrize("status,cls", [(3, OutOfMemoryError), (7, BackendSourceError),
                                        (15, BackendSourceError)],
                         ids=["alloc_failed", "invalid_value", "not_supported"])
def test_status_mapping(status, cls):
    class Fail(Exception):
        pass

    exc = Fail()
    exc.status = status
    err = _cublas.error("cublasGemmEx", exc, "dot_general")
    assert type(err) is cls and err.op == "dot_general"
    assert isinstance(err.__cause__, CublasError) and err.__cause__.code == status
    assert "cublasGemmEx failed" in str(err)


@needs_nvmath
def test_abi_constants_match_bindings():
    lib = _cublas._import_bindings()
    assert (int(lib.Operation.N), int(lib.Operation.T), int(lib.Operation.C)) == (
        _cublas.OP_N, _cublas.OP_T, _cublas.OP_C)
    ct = lib.ComputeType
    assert (int(ct.COMPUTE_32F), int(ct.COMPUTE_32F_FAST_TF32), int(ct.COMPUTE_64F)) == (
        _cublas.COMPUTE_32F, _cublas.COMPUTE_32F_FAST_TF32, _cublas.COMPUTE_64F)
    assert int(lib.GemmAlgo.DEFAULT) == _cublas.GEMM_DEFAULT
    assert int(lib.Math.DEFAULT_MATH) == _cublas.DEFAULT_MATH
    assert int(lib.PointerMode.HOST) == _cublas.POINTER_MODE_HOST
    assert int(lib.Status.ALLOC_FAILED) == _cublas.STATUS_ALLOC_FAILED


def test_cuda_data_type_constants():
    # library_types.h (cudaDataType_t): stable ABI values
    assert (_cublas.R_32F, _cublas.R_64F, _cublas.R_16F, _cublas.C_32F, _cublas.C_64F,
            _cublas.R_16BF) == (0, 1, 2, 4, 5, 14)
    if HAS_NVMATH:
        out = _run("""
            import json
            from nvmath._utils import CudaDataType as T
            print(json.dumps([int(T.CUDA_R_32F), int(T.CUDA_R_64F), int(T.CUDA_R_16F),
                              int(T.CUDA_C_32F), int(T.CUDA_C_64F), int(T.CUDA_R_16BF)]))
        """)
        assert out == [0, 1, 2, 4, 5, 14]
