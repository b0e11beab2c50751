"""``CudaRuntime.load_compiled``: a program whose image the driver refuses (or that lacks
the function asked for) is compiled again without the kernel cache, once; any other
failure is raised as it is. And ``compile_cached(fresh=True)`` compiles without reading
the cache and replaces the entry. No GPU: the loads are emulated."""

from __future__ import annotations

import pytest

from tenferro_cuda import _driver
from tenferro_cuda._nvrtc import CompiledProgram
from tenferro_cuda.errors import BackendSourceError, OutOfMemoryError
from tenferro_cuda.kernels import cache as C
from tenferro_cuda.kernels import compiler
from tenferro_cuda.runtime import CudaRuntime


class _Loads:
    """The part of a runtime ``load_compiled`` uses: loads that fail with ``codes`` first."""

    load_compiled = CudaRuntime.load_compiled

    def __init__(self, *codes: int) -> None:
        self.codes = list(codes)
        self.loaded: list = []

    def _load_program(self, prog, op, expression, shared):
        if self.codes:
            raise _driver.error_for("cuModuleLoadData", self.codes.pop(0), op)
        self.loaded.append((prog, op, expression, shared))
        return f"module of {prog}"


def _compiles():
    asked: list[bool] = []

    def compile(fresh: bool) -> str:
        asked.append(fresh)
        return "fresh" if fresh else "cached"
    return compile, asked


@pytest.mark.parametrize("code", [200, 209, 218, 222, 500])
def test_an_image_the_driver_refuses_is_compiled_again_once(code):
    loads, (compile, asked) = _Loads(code), _compiles()
    got = loads.load_compiled(compile, "add", "tf::k<float>")
    assert got == "module of fresh" and asked == [False, True]
    assert loads.loaded == [("fresh", "add", "tf::k<float>", False)]


def test_a_second_refusal_is_raised():
    loads, (compile, asked) = _Loads(200, 200), _compiles()
    with pytest.raises(BackendSourceError, match="CUDA_ERROR_INVALID_IMAGE|200"):
        loads.load_compiled(compile, "add", "tf::k<float>")
    assert asked == [False, True]


@pytest.mark.parametrize("code, error", [(2, OutOfMemoryError), (1, BackendSourceError)])
def test_other_failures_are_raised_without_a_compile(code, error):
    loads, (compile, asked) = _Loads(code), _compiles()
    with pytest.raises(error):
        loads.load_compiled(compile, "compile_nvrtc", shared=True)
    assert asked == [False] and loads.loaded == []


def test_a_loaded_program_is_not_compiled_again():
    loads, (compile, asked) = _Loads(), _compiles()
    assert loads.load_compiled(compile, "compile_nvrtc", shared=True) == "module of cached"
    assert asked == [False] and loads.loaded == [("cached", "compile_nvrtc", None, True)]


def test_fresh_compiles_past_the_cache_and_replaces_the_entry(tmp_path, monkeypatch):
    made = []

    def compile_program(source, name, options, expressions, op=""):
        made.append(source)
        return CompiledProgram(b"\x7fELF" + str(len(made)).encode() * 16,
                               {e: f"_Z{len(made)}" for e in expressions}, "")
    monkeypatch.setattr(compiler._nvrtc, "compile_program", compile_program)
    monkeypatch.setattr(compiler.toolchain, "version", lambda directory: "13.0")
    monkeypatch.setattr(compiler.toolchain, "confirm", lambda: "13.0")
    monkeypatch.setattr(compiler.toolchain, "record", lambda directory: None)
    cache = C.KernelCache(tmp_path)
    first = compiler.compile_cached("src", "k.cu", ("k",), 90, cache=cache)
    assert compiler.compile_cached("src", "k.cu", ("k",), 90, cache=cache) == first
    assert len(made) == 1  # a cache hit
    again = compiler.compile_cached("src", "k.cu", ("k",), 90, cache=cache, fresh=True)
    assert len(made) == 2 and again != first
    reread = C.KernelCache(tmp_path)  # a new process reads the replaced entry
    assert compiler.compile_cached("src", "k.cu", ("k",), 90, cache=reread) == again
    assert len(made) == 2


def test_a_module_without_the_function_is_unloaded(monkeypatch):
    import contextlib
    import threading

    from tenferro_cuda import runtime as runtime_mod

    rt = object.__new__(CudaRuntime)
    rt._modules, rt._lock = [], threading.RLock()
    monkeypatch.setattr(CudaRuntime, "current", lambda self: contextlib.nullcontext())
    unloaded = []
    monkeypatch.setattr(runtime_mod._driver, "module_load_data", lambda image, op="": "M")
    monkeypatch.setattr(runtime_mod._driver, "module_unload", unloaded.append)

    def missing(module, name, op=""):
        raise _driver.error_for("cuModuleGetFunction", 500, op)
    monkeypatch.setattr(runtime_mod._driver, "module_get_function", missing)
    prog = CompiledProgram(b"img", {"tf::k<float>": "_Z1k"}, "")
    with pytest.raises(BackendSourceError):
        rt._load_program(prog, "add", "tf::k<float>", False)
    assert rt._modules == [] and unloaded == ["M"]
