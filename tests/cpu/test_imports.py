"""Only the binding modules (_driver.py, _driver_fast.py, _driver_memory.py, _nvrtc.py,
_cublas.py, _nccl.py) may import native bindings (DESIGN 1), and the op families never
reach a binding module, not even through a re-export (DESIGN 9).

Scans every module of the package with ``ast``: ``import``/``from`` statements and
string-named dynamic imports (``importlib.import_module``, ``__import__``); and imports
every op module to check what its globals are.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tenferro_cuda"
ALLOWED = {"_driver.py", "_driver_fast.py", "_driver_memory.py", "_nvrtc.py", "_cublas.py",
           "_nccl.py"}
NATIVE_ROOTS = ("cuda", "nvmath", "nccl")
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _is_native(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in NATIVE_ROOTS


def native_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) for every import of a native binding in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _is_native(a.name)]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and _is_native(node.module):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            arg = node.args[0]
            if (name in ("import_module", "__import__") and isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str) and _is_native(arg.value)):
                found.append((node.lineno, arg.value))
    return found


def test_package_found():
    assert (PACKAGE / "__init__.py").is_file()
    assert len(SOURCES) > 5


@pytest.mark.parametrize("path", SOURCES, ids=[str(p.relative_to(PACKAGE)) for p in SOURCES])
def test_native_imports_only_in_binding_modules(path):
    found = native_imports(path.read_text(encoding="utf-8"))
    if path.parent == PACKAGE and path.name in ALLOWED:
        return
    assert found == [], f"{path.relative_to(PACKAGE.parent)} imports native bindings: {found}"


SCANNER_CASES = [
    ("import cuda", True),
    ("import cuda.bindings.driver as d", True),
    ("from cuda.bindings import driver", True),
    ("from cuda import bindings", True),
    ("import nvmath.bindings.cublas", True),
    ("from nvmath.bindings import cublas as cb", True),
    ("import importlib\nimportlib.import_module('nvmath.bindings.cublas')", True),
    ("import importlib\nimportlib.import_module('nccl.bindings.nccl')", True),
    ("from nccl.bindings import nccl", True),
    ("__import__('cuda.bindings.nvrtc')", True),
    ("def f():\n    from cuda.bindings import nvrtc\n", True),
    ("from . import _driver", False),
    ("from .cuda_helpers import x", False),
    ("import cudatoolkit_helper", False),
    ("import numpy as np", False),
    ("x = 'import cuda'", False),
]


@pytest.mark.parametrize(("source", "native"), SCANNER_CASES,
                         ids=[s.replace("\n", ";") for s, _ in SCANNER_CASES])
def test_scanner(source, native):
    assert bool(native_imports(source)) is native


BINDINGS = ("tenferro_cuda._driver", "tenferro_cuda._driver_fast",
            "tenferro_cuda._driver_memory", "tenferro_cuda._nvrtc",
            "tenferro_cuda._cublas", "tenferro_cuda._cublas_lt", "tenferro_cuda._nccl")
BINDING_NAME = re.compile(r"\b_(driver|driver_fast|driver_memory|cublas|cublas_lt|nvrtc|nccl)\b")
OPS_SOURCES = sorted((PACKAGE / "ops").rglob("*.py"))


def _op_modules() -> list[str]:
    names = []
    for path in OPS_SOURCES:
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def _from_binding(value: object) -> bool:
    """Whether ``value`` is a binding module or something defined in one."""
    if inspect.ismodule(value):
        return value.__name__ in BINDINGS or _is_native(value.__name__)
    owner = getattr(value, "__self__", None)  # a bound method of a binding object
    if owner is not None and not inspect.ismodule(owner) and _from_binding(type(owner)):
        return True
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        module = getattr(type(value), "__module__", "")
    return module in BINDINGS or _is_native(module)


@pytest.mark.parametrize("name", _op_modules())
def test_op_module_globals_hold_no_binding(name):
    """DESIGN 9: an op family's globals hold no binding module, no function or class of
    one, and no re-export of one (``raw_launch = _driver._launch`` was such a case)."""
    module = importlib.import_module(name)
    leaks = sorted(key for key, value in vars(module).items() if _from_binding(value))
    assert leaks == [], f"{name} holds binding objects: {leaks}"


@pytest.mark.parametrize("path", OPS_SOURCES,
                         ids=[str(p.relative_to(PACKAGE)) for p in OPS_SOURCES])
def test_op_sources_never_name_a_binding(path):
    found = [i + 1 for i, line in enumerate(path.read_text().splitlines())
             if BINDING_NAME.search(line)]
    assert found == [], f"{path.relative_to(PACKAGE.parent)} names a binding on lines {found}"


def test_globals_check_catches_a_reexport(monkeypatch):
    """The globals check is not vacuous: a re-exported driver function is caught."""
    from tenferro_cuda import _driver, _driver_fast
    from tenferro_cuda.ops import storage

    monkeypatch.setattr(storage, "launch", _driver_fast.launch, raising=False)
    assert _from_binding(vars(storage)["launch"])
    monkeypatch.setattr(storage, "bindings", _driver, raising=False)
    assert _from_binding(vars(storage)["bindings"])


def test_kernels_package_reexports_no_driver_entry_point():
    """``kernels/`` offers launches only through ``kernels/launch.py``."""
    import tenferro_cuda.kernels as kernels

    for path in sorted((PACKAGE / "kernels").rglob("*.py")):
        if path.name == "launch.py":
            continue
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        module = importlib.import_module(".".join(parts))
        leaks = [k for k, v in vars(module).items() if callable(v)
                 and (getattr(v, "__module__", None) or "").startswith("cuda.bindings")]
        assert leaks == [], (module.__name__, leaks)
    assert kernels is not None
