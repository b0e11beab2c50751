"""Only _driver.py, _nvrtc.py and _cublas.py may import native bindings (DESIGN §1).

Scans every module of the package with ``ast``: ``import``/``from`` statements and
string-named dynamic imports (``importlib.import_module``, ``__import__``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tenferro_cuda"
ALLOWED = {"_driver.py", "_nvrtc.py", "_cublas.py"}
NATIVE_ROOTS = ("cuda", "nvmath")
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


def test_ops_reach_the_driver_only_through_kernels():
    """DESIGN 1: ops/* validate with shapes/, allocate with memory.py, launch through
    kernels/ -- they never import _driver (or a native binding) themselves."""
    offenders = []
    for path in sorted((PACKAGE / "ops").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(
                    alias.name in ("_driver", "_nvrtc") for alias in node.names):
                offenders.append(path.name)
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_driver"):
                offenders.append(path.name)
    assert not offenders, offenders
