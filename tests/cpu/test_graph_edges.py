"""Programmatic edges (graph_edges.py): every library kernel waits first, the runtime
records exactly the functions that do, and only kernel edges into them change -- with the
graph left as it was when the driver cannot."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tenferro_cuda import _driver_graph as dg
from tenferro_cuda import fusion_codegen, graph_edges
from tenferro_cuda.runtime import CudaRuntime

PTX = Path(__file__).resolve().parents[2] / "ptx"
_GLOBAL = re.compile(r"__global__\b")


def _first_statements(source: str) -> list[str]:
    """The first statement of the body of every ``__global__`` function in ``source``."""
    out = []
    for m in _GLOBAL.finditer(source):
        body = source.index("{", m.end())
        out.append(source[body + 1:source.index(";", body) + 1].strip())
    return out


@pytest.mark.parametrize("path", sorted(PTX.glob("*.cu")), ids=lambda p: p.name)
def test_every_library_kernel_waits_first(path):
    firsts = _first_statements(path.read_text())
    assert firsts, f"{path.name} defines no kernel"
    assert all(f == "tf::grid_wait();" for f in firsts), firsts


def test_the_fusion_kernel_waits_first():
    snippets = [t for t in fusion_codegen.SNIPPET.values() if "__global__" in t]
    assert len(snippets) == 1
    assert _first_statements(snippets[0]) == ["tf::grid_wait();"]


def test_grid_wait_is_the_dependency_wait_on_sm90_only():
    text = (PTX / "include" / "tenferro" / "types.cuh").read_text()
    body = text[text.index("void grid_wait()"):]
    body = body[:body.index("\n}\n")]
    assert "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900" in body
    assert 'asm volatile("griddepcontrol.wait;" ::: "memory");' in body


# --- the runtime's record ----------------------------------------------------------------
class _Fn:
    def __init__(self, handle: int) -> None:
        self.handle = handle

    def __int__(self) -> int:
        return self.handle


@pytest.fixture
def runtime(monkeypatch):
    import threading

    from tenferro_cuda import runtime as runtime_mod

    rt = object.__new__(CudaRuntime)
    rt._functions, rt._lock = {}, threading.RLock()
    rt.waiting_functions = set()
    rt.info = SimpleNamespace(arch=90)
    handles = iter(range(0x100, 0x200))
    monkeypatch.setattr(runtime_mod, "compile_family", lambda *a, **k: None)
    monkeypatch.setattr(runtime_mod, "compile_cached", lambda *a, **k: None)
    monkeypatch.setattr(CudaRuntime, "_load_program",
                        lambda self, prog, op, expression, shared: _Fn(next(handles)))
    return rt


def test_family_and_fusion_functions_are_recorded_a_users_are_not(runtime):
    fam = runtime.function("elementwise", "tf::ew_small<tf::AddOp, float>")
    users = runtime.function_from_source("src", "k.cu", "user_kernel")
    fused = runtime.function_from_source("gen", "f.cu", "fused", waits=True)
    assert runtime.waiting_functions == {int(fam), int(fused)}
    # the same source asked for by the library later: the same function, recorded then
    again = runtime.function_from_source("src", "k.cu", "user_kernel", waits=True)
    assert again is users and int(users) in runtime.waiting_functions
    # asked again without ``waits``: nothing is taken away, nothing added
    runtime.function_from_source("gen", "f.cu", "fused")
    assert runtime.waiting_functions == {int(fam), int(fused), int(users)}


# --- which edges change ------------------------------------------------------------------
def _edge(from_port=0, to_port=0, kind=0):
    e = dg.EdgeData()
    e.from_port, e.to_port, e.type = from_port, to_port, kind
    return e


@pytest.fixture
def graph(monkeypatch):
    """Nodes 1-6: kernels 1-4 (functions 11, 12 (a user's), 13, 14), a memcpy 5, a
    memset 6; the edges given by each test; what make_edges_programmatic is asked."""
    g = SimpleNamespace(edges=[], asked=[], accept=True)
    kinds = {1: dg.NODE_KERNEL, 2: dg.NODE_KERNEL, 3: dg.NODE_KERNEL, 4: dg.NODE_KERNEL,
             5: dg.NODE_MEMCPY, 6: dg.NODE_MEMSET}
    monkeypatch.setattr(dg, "graph_edges", lambda handle: list(g.edges))
    monkeypatch.setattr(dg, "node_type", lambda node: kinds[node])
    monkeypatch.setattr(dg, "kernel_function", lambda node: 10 + node)

    def make(handle, edges):
        g.asked.append(list(edges))
        return g.accept and bool(edges)
    monkeypatch.setattr(dg, "make_edges_programmatic", make)
    return g


WAITING = {11, 13, 14}


def test_only_plain_kernel_edges_into_waiting_kernels(graph):
    graph.edges = [(1, 2, _edge()),   # into a user's kernel: kept
                   (2, 3, _edge()),   # a user's kernel into ours: programmatic
                   (3, 4, _edge()),   # ours into ours: programmatic
                   (5, 1, _edge()),   # a copy into ours: kept
                   (4, 6, _edge()),   # ours into a memset: kept
                   (1, 4, _edge(1, 0, 1)),  # annotated already: kept
                   (1, 3, _edge(0, 2, 0))]  # another port: kept
    assert graph_edges.make_programmatic(0xA, WAITING) == 2
    assert graph.asked == [[(2, 3), (3, 4)]]


def test_nothing_eligible_or_a_driver_that_cannot(graph):
    graph.edges = [(1, 2, _edge()), (5, 3, _edge())]
    assert graph_edges.make_programmatic(0xA, WAITING) == 0
    assert graph.asked == [[]]
    graph.edges, graph.accept = [(3, 4, _edge())], False
    assert graph_edges.make_programmatic(0xA, WAITING) == 0


# --- the driver calls --------------------------------------------------------------------
class _Lib:
    """The three edge calls, recording (name, [(from, to, from_port, type)])."""

    def __init__(self, add_status=0, missing=()) -> None:
        self.calls: list[tuple[str, list]] = []
        self.add_status = add_status
        for name in ("cuGraphRemoveDependencies_v2", "cuGraphAddDependencies_v2"):
            if name not in missing:
                setattr(self, name, self._recorder(name))

    def _recorder(self, name):
        def call(graph, sources, targets, data, n):
            self.calls.append((name, [(sources[i], targets[i], data[i].from_port,
                                       data[i].type) for i in range(n)]))
            if name.startswith("cuGraphAdd") and data[0].type:
                return self.add_status
            return 0
        return call


def test_edges_are_removed_then_added_programmatic(monkeypatch):
    lib = _Lib()
    monkeypatch.setattr(dg, "lib", lambda: lib)
    assert dg.make_edges_programmatic(7, [(0x10, 0x20), (0x20, 0x30)]) is True
    plain = [(0x10, 0x20, 0, 0), (0x20, 0x30, 0, 0)]
    prog = [(0x10, 0x20, 1, 1), (0x20, 0x30, 1, 1)]
    assert lib.calls == [("cuGraphRemoveDependencies_v2", plain),
                         ("cuGraphAddDependencies_v2", prog)]


def test_a_refused_add_puts_the_plain_edges_back(monkeypatch):
    lib = _Lib(add_status=1)
    monkeypatch.setattr(dg, "lib", lambda: lib)
    assert dg.make_edges_programmatic(7, [(0x10, 0x20)]) is False
    assert [name for name, _ in lib.calls] == ["cuGraphRemoveDependencies_v2",
                                               "cuGraphAddDependencies_v2",
                                               "cuGraphAddDependencies_v2"]
    assert lib.calls[-1][1] == [(0x10, 0x20, 0, 0)]


def test_a_driver_without_edge_data_changes_nothing(monkeypatch):
    lib = _Lib(missing=("cuGraphAddDependencies_v2",))
    monkeypatch.setattr(dg, "lib", lambda: lib)
    assert dg.make_edges_programmatic(7, [(0x10, 0x20)]) is False
    assert lib.calls == []
    monkeypatch.setattr(dg, "lib", lambda: SimpleNamespace())
    assert dg.graph_edges(7) == []
    assert dg.make_edges_programmatic(7, []) is False


def test_edge_data_layout():
    assert ctypes.sizeof(dg.EdgeData) == 8
    assert [f for f, _ in dg.EdgeData._fields_][:3] == ["from_port", "to_port", "type"]


def test_a_graph_without_edges_is_asked_once(monkeypatch):
    """One node, no edge: the driver is asked for the count only (asking it for zero
    edges into arrays is an error)."""
    calls = []

    def get(graph, sources, targets, data, count):
        calls.append(sources)
        return 0  # (count stays 0)
    monkeypatch.setattr(dg, "lib", lambda: SimpleNamespace(cuGraphGetEdges_v2=get))
    assert dg.graph_edges(7) == [] and calls == [None]
