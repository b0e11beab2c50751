"""The package's modules import one another without circles.

Every ``import`` counts: at module level, inside a function (a lazy import is still a
dependency) and under ``if TYPE_CHECKING:`` (an annotation is a dependency of the reader).
Where a lower layer needs something of a higher one it names what it uses as a
``Protocol`` (the execution context's ``Runtime``, cuBLAS's ``Owner``, the capture's
``Capturing``), or the higher layer installs it: the tensor layer answers the export
protocols for host tensors itself and the interop layer installs the device side
(``tensor.install_export``).
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tenferro_cuda"


def _targets(node: ast.AST, module: str, is_package: bool, modules) -> list[str]:
    """The modules an import statement loads (``from . import x``: ``x`` when it is a
    module, else the package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    origin = node.module or ""
    if node.level:
        base = module.split(".")
        if not is_package:
            base.pop()
        base = base[:len(base) - (node.level - 1)]
        origin = ".".join(base + ([node.module] if node.module else []))
    names = [f"{origin}.{alias.name}" for alias in node.names]
    return [n if n in modules else origin for n in names]


def import_graph(package: Path = PACKAGE, typing: bool = True) -> dict[str, set[str]]:
    """module -> the modules of ``package`` it imports (with ``typing=False``, imports
    under ``if TYPE_CHECKING:`` left out); modules are named from the package's parent
    folder."""
    files = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node, typed in _imports(path, path.stat().st_mtime_ns):
            if typed and not typing:
                continue
            for target in _targets(node, name, path.name == "__init__.py", files):
                if target in files and target != name:
                    graph[name].add(target)
    return graph


@functools.cache
def _imports(path: Path, mtime: int) -> list[tuple[ast.AST, bool]]:
    """The import statements of the file ``path`` (as of ``mtime``: one parse per
    version), each with whether it sits under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    typed = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typed.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return [(node, id(node) in typed) for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles():
    assert circles(import_graph()) == []
    assert circles(import_graph(typing=False)) == []


def test_the_circle_finder_finds_a_lazy_circle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text("def f():\n    from .high import g\n    return g\n")
    (package / "high.py").write_text("from .low import f\n")
    (package / "typed.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import f\n")
    (package / "high.py").write_text("from .low import f\nfrom .typed import g\n")
    assert circles(import_graph(package)) == [["pkg.high", "pkg.low", "pkg.typed"]]
    assert circles(import_graph(package, typing=False)) == [["pkg.high", "pkg.low"]]


# What ``shapes/`` (shape inference, argument validation, the alias rule: pure Python, no
# device) may import of the package: the layers below it, nothing above.
SHAPES_MAY_IMPORT = {"tenferro_cuda.errors", "tenferro_cuda.dtypes", "tenferro_cuda.values",
                     "tenferro_cuda.configs"}


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


# ... and what ``configs/`` (the validated dataclasses, below shapes/) may import.
CONFIGS_MAY_IMPORT = {"tenferro_cuda.errors", "tenferro_cuda.dtypes", "tenferro_cuda.values"}


@pytest.mark.parametrize("package, allowed", [("tenferro_cuda.shapes", SHAPES_MAY_IMPORT),
                                              ("tenferro_cuda.configs", CONFIGS_MAY_IMPORT)])
def test_a_lower_package_imports_nothing_above_it(package, allowed):
    graph = import_graph()  # annotations included: shapes reads tensors through a Protocol
    for name, targets in graph.items():
        if name == package or name.startswith(package + "."):
            for target in targets:
                below = any(target == m or target.startswith(m + ".")
                            for m in allowed | {package})
                assert below, f"{name} imports {target}"


def test_the_dlpack_export_never_reaches_the_op_families():
    # (its copy=True copy is an op family's function, installed: install_copy)
    reached = _reach(import_graph(), "tenferro_cuda._dlpack_export")
    assert not any(m == "tenferro_cuda.ops" or m.startswith("tenferro_cuda.ops.")
                   for m in reached)


def test_the_op_families_install_the_export_copy():
    from tenferro_cuda import _dlpack_export
    from tenferro_cuda.ops import interop

    assert _dlpack_export._copier == [interop.export_copy]


@pytest.mark.parametrize("module", ["tenferro_cuda.tensor", "tenferro_cuda.dlpack",
                                    "tenferro_cuda.exec.context"])
def test_lower_layers_never_reach_the_interop_layer(module):
    graph = import_graph()
    seen, todo = set(), [module]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    if module != "tenferro_cuda.dlpack":
        assert "tenferro_cuda._dlpack_export" not in seen
        assert "tenferro_cuda.cai" not in seen
    assert "tenferro_cuda.ops.interop" not in seen


def test_host_tensors_answer_the_export_protocols_without_the_interop_layer():
    code = textwrap.dedent("""
        import json, sys
        import numpy as np
        from tenferro_cuda import Tensor
        t = Tensor.from_numpy(np.arange(3.0))
        facts = [list(t.__dlpack_device__()), hasattr(t, "__cuda_array_interface__")]
        try:
            t.__dlpack__()
        except BufferError as exc:
            facts.append("BufferError: " + str(exc)[:10])
        facts.append(sorted(m for m in sys.modules
                            if m in ("tenferro_cuda._dlpack_export", "tenferro_cuda.cai")))
        print(json.dumps(facts))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [[1, 0], False, "BufferError: __dlpack__", []]


def test_the_interop_layer_installs_the_device_side():
    from tenferro_cuda import _dlpack_export, cai
    from tenferro_cuda.tensor import Tensor, TensorView

    for cls in (Tensor, TensorView):
        assert cls.__dlpack__ is _dlpack_export.export_capsule
        assert cls.__dlpack_device__ is _dlpack_export.dlpack_device
        assert cls.__cuda_array_interface__.fget is cai.export_interface
