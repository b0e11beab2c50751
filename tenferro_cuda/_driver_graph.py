"""The driver calls of CUDA graphs: stream capture, instantiation, launch, and the kernel,
memcpy and memset node parameters a rebinding replay reads and writes.

These go through ``ctypes`` on the process's ``libcuda`` (the library ``cuda.bindings``
has already loaded), with the parameter structs laid out here: the node parameters are
read back as raw bytes and written from buffers this package owns, which the bindings'
struct objects do not expose. Handles are plain ints. Every call returns the CUresult;
``call`` raises the package's typed error for a failure (``_driver.error_for``).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_int, c_size_t, c_ubyte, c_uint, c_void_p
from typing import Any

from . import _driver

__all__ = ["KernelNodeParams", "Memcpy3D", "MemsetParams", "lib", "call", "begin_capture",
           "end_capture", "instantiate", "graph_nodes", "node_type", "param_sizes",
           "kernel_params", "kernel_function", "graph_edges", "make_edges_programmatic",
           "NODE_KERNEL", "NODE_MEMCPY", "NODE_MEMSET", "CAPTURE_INVALIDATED"]

CAPTURE_MODE_RELAXED = 2
NODE_KERNEL, NODE_MEMCPY, NODE_MEMSET = 0, 1, 2
CAPTURE_INVALIDATED = 901  # CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
_INVALID_VALUE = 1
PORT_PROGRAMMATIC = 1  # CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
DEPENDENCY_PROGRAMMATIC = 1  # CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC


class KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2."""

    _fields_ = [("func", c_void_p), ("grid", c_uint * 3), ("block", c_uint * 3),
                ("shared", c_uint), ("params", POINTER(c_void_p)), ("extra", c_void_p),
                ("kern", c_void_p), ("ctx", c_void_p)]


class _Side(ctypes.Structure):
    _fields_ = [("x", c_size_t), ("y", c_size_t), ("z", c_size_t), ("lod", c_size_t),
                ("memory_type", c_int), ("host", c_void_p), ("device", c_size_t),
                ("array", c_void_p), ("reserved", c_void_p), ("pitch", c_size_t),
                ("height", c_size_t)]


class Memcpy3D(ctypes.Structure):
    """CUDA_MEMCPY3D."""

    _fields_ = [("src", _Side), ("dst", _Side), ("width", c_size_t), ("height", c_size_t),
                ("depth", c_size_t)]


class MemsetParams(ctypes.Structure):
    """CUDA_MEMSET_NODE_PARAMS."""

    _fields_ = [("dst", c_size_t), ("pitch", c_size_t), ("value", c_uint),
                ("element_size", c_uint), ("width", c_size_t), ("height", c_size_t)]


class EdgeData(ctypes.Structure):
    """CUgraphEdgeData (all zero: a full dependency with memory visibility)."""

    _fields_ = [("from_port", c_ubyte), ("to_port", c_ubyte), ("type", c_ubyte),
                ("reserved", c_ubyte * 5)]


_lib: Any = None
_SIGNATURES = {
    "cuStreamBeginCapture_v2": (c_void_p, c_int),
    "cuStreamEndCapture": (c_void_p, POINTER(c_void_p)),
    "cuStreamIsCapturing": (c_void_p, POINTER(c_int)),
    "cuGraphInstantiateWithFlags": (POINTER(c_void_p), c_void_p, ctypes.c_ulonglong),
    "cuGraphLaunch": (c_void_p, c_void_p),
    "cuGraphExecDestroy": (c_void_p,),
    "cuGraphDestroy": (c_void_p,),
    "cuGraphGetNodes": (c_void_p, POINTER(c_void_p), POINTER(c_size_t)),
    "cuGraphNodeGetType": (c_void_p, POINTER(c_int)),
    "cuGraphKernelNodeGetParams_v2": (c_void_p, POINTER(KernelNodeParams)),
    "cuGraphExecKernelNodeSetParams_v2": (c_void_p, c_void_p, POINTER(KernelNodeParams)),
    "cuGraphMemcpyNodeGetParams": (c_void_p, POINTER(Memcpy3D)),
    "cuGraphExecMemcpyNodeSetParams": (c_void_p, c_void_p, POINTER(Memcpy3D), c_void_p),
    "cuGraphMemsetNodeGetParams": (c_void_p, POINTER(MemsetParams)),
    "cuGraphExecMemsetNodeSetParams": (c_void_p, c_void_p, POINTER(MemsetParams), c_void_p),
    "cuFuncGetParamInfo": (c_void_p, c_size_t, POINTER(c_size_t), POINTER(c_size_t)),
    "cuKernelGetParamInfo": (c_void_p, c_size_t, POINTER(c_size_t), POINTER(c_size_t)),
}
_NODES = POINTER(c_void_p)
# Edge data came with CUDA 12.3; a driver without these calls keeps every edge as it is.
_OPTIONAL = {
    "cuGraphGetEdges_v2": (c_void_p, _NODES, _NODES, POINTER(EdgeData), POINTER(c_size_t)),
    "cuGraphRemoveDependencies_v2": (c_void_p, _NODES, _NODES, POINTER(EdgeData), c_size_t),
    "cuGraphAddDependencies_v2": (c_void_p, _NODES, _NODES, POINTER(EdgeData), c_size_t),
}


def lib() -> Any:
    """The driver library with the signatures above (loaded on first use)."""
    global _lib
    if _lib is None:
        _driver.init()
        cuda = ctypes.CDLL("libcuda.so.1")
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(cuda, name)
            fn.argtypes, fn.restype = argtypes, c_int
        for name, argtypes in _OPTIONAL.items():
            fn = getattr(cuda, name, None)
            if fn is not None:
                fn.argtypes, fn.restype = argtypes, c_int
        _lib = cuda
    return _lib


def call(api: str, *args: Any, op: str = "") -> None:
    """``lib().<api>(*args)``, raising the typed error of a failure."""
    status = getattr(lib(), api)(*args)
    if status:
        raise _driver.error_for(api, status, op)


def begin_capture(stream: int, op: str) -> None:
    """Put ``stream`` in capture mode. Relaxed mode: the driver does not refuse this
    thread's "potentially unsafe" calls (allocations) while it captures, so graph memory
    can be allocated on another stream and cuBLAS can set itself up; what must not run
    during a capture is refused by the package itself (``exec/capture.py``), and other
    threads are never affected."""
    call("cuStreamBeginCapture_v2", stream, CAPTURE_MODE_RELAXED, op=op)


def end_capture(stream: int) -> tuple[int, int]:
    """End capture on ``stream``: (CUresult, graph handle or 0)."""
    graph = c_void_p(0)
    status = lib().cuStreamEndCapture(stream, ctypes.byref(graph))
    return status, graph.value or 0


def is_capturing(stream: int) -> int:
    """The capture status of ``stream`` (0 none, 1 active, 2 invalidated)."""
    state = c_int(0)
    call("cuStreamIsCapturing", stream, ctypes.byref(state))
    return state.value


def instantiate(graph: int, op: str) -> int:
    exe = c_void_p(0)
    call("cuGraphInstantiateWithFlags", ctypes.byref(exe), graph, 0, op=op)
    return exe.value or 0


def graph_nodes(graph: int) -> list[int]:
    count = c_size_t(0)
    call("cuGraphGetNodes", graph, None, ctypes.byref(count))
    nodes = (c_void_p * max(count.value, 1))()
    call("cuGraphGetNodes", graph, nodes, ctypes.byref(count))
    return [n or 0 for n in nodes[:count.value]]


def node_type(node: int) -> int:
    kind = c_int(0)
    call("cuGraphNodeGetType", node, ctypes.byref(kind))
    return kind.value


def param_sizes(params: KernelNodeParams) -> list[int]:
    """The byte size of each parameter of a kernel node's function."""
    cuda = lib()
    fn, handle = ((cuda.cuFuncGetParamInfo, params.func) if params.func else
                  (cuda.cuKernelGetParamInfo, params.kern))
    sizes: list[int] = []
    offset, size = c_size_t(0), c_size_t(0)
    while True:
        status = fn(handle, len(sizes), ctypes.byref(offset), ctypes.byref(size))
        if status == _INVALID_VALUE:
            return sizes
        if status:
            raise _driver.error_for("cuFuncGetParamInfo", status)
        sizes.append(size.value)


def kernel_params(node: int) -> KernelNodeParams:
    """The parameters of a kernel node (its function, geometry, argument pointers)."""
    params = KernelNodeParams()
    call("cuGraphKernelNodeGetParams_v2", node, ctypes.byref(params))
    return params


def kernel_function(node: int) -> int:
    """The CUfunction handle a kernel node launches (0 for a CUkernel's node)."""
    return kernel_params(node).func or 0


def graph_edges(graph: int) -> list[tuple[int, int, EdgeData]]:
    """The edges of ``graph`` as (from node, to node, edge data); empty when the driver
    has no edge data."""
    get = getattr(lib(), "cuGraphGetEdges_v2", None)
    if get is None:
        return []
    count = c_size_t(0)
    status = get(graph, None, None, None, ctypes.byref(count))
    if status:
        raise _driver.error_for("cuGraphGetEdges", status)
    n = count.value
    if not n:
        return []  # (asked for 0 edges into arrays, the driver answers INVALID_VALUE)
    sources, targets, data = (c_void_p * n)(), (c_void_p * n)(), (EdgeData * n)()
    status = get(graph, sources, targets, data, ctypes.byref(count))
    if status:
        raise _driver.error_for("cuGraphGetEdges", status)
    return [(sources[i] or 0, targets[i] or 0, data[i]) for i in range(min(n, count.value))]


def make_edges_programmatic(graph: int, edges: list[tuple[int, int]]) -> bool:
    """Replace the plain edges ``edges`` (from, to) of ``graph`` by programmatic ones: the
    downstream kernel may be launched while the upstream one finishes and waits for it
    itself (``tf::grid_wait``). False, with the graph as it was, when the driver cannot."""
    cuda = lib()
    remove = getattr(cuda, "cuGraphRemoveDependencies_v2", None)
    add = getattr(cuda, "cuGraphAddDependencies_v2", None)
    if not edges or remove is None or add is None:
        return False
    n = len(edges)
    sources = (c_void_p * n)(*[a for a, _ in edges])
    targets = (c_void_p * n)(*[b for _, b in edges])
    plain = (EdgeData * n)()
    status = remove(graph, sources, targets, plain, n)
    if status:
        raise _driver.error_for("cuGraphRemoveDependencies", status)
    programmatic = (EdgeData * n)()
    for edge in programmatic:
        edge.from_port, edge.type = PORT_PROGRAMMATIC, DEPENDENCY_PROGRAMMATIC
    if add(graph, sources, targets, programmatic, n) == 0:
        return True
    status = add(graph, sources, targets, plain, n)  # put the plain edges back
    if status:
        raise _driver.error_for("cuGraphAddDependencies", status)
    return False
