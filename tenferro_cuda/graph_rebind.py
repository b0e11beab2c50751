"""Rebinding a graph's memory without copies: where a graph holds each address, and how a
replay moves it.

``NodeTable(graph)`` reads every node of a captured graph once: for a kernel node, its
parameters, copied into buffers this table owns (sizes from ``cuFuncGetParamInfo``); for a
memcpy or memset node, its parameter struct. Every 8-byte-aligned, 8-byte word of a kernel
parameter, and every device address of a memcpy or memset node, is a *site* that may hold
a device address. ``sites(lo, hi)`` lists the sites whose value lies in ``[lo, hi)``: the
view of a tensor the capture used. ``move(sites, shift)`` writes each site's original
value plus ``shift`` and pushes the changed nodes into the executable graph
(``cuGraphExec*NodeSetParams``), which only the next launch sees.

Every kernel launched in the capture is covered the same way -- the library's, cuBLAS's,
and a raw or kernel-session body's -- as long as it takes the address as a parameter; an
address a kernel reads from device memory (a pointer table) is not a parameter and is not
moved (``CudaGraph`` refuses rebinding a tensor used by such an op).
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

from . import _driver_graph as dg

__all__ = ["NodeTable"]

_WORD = struct.Struct("<Q")
_DEVICE_MEMORY = 2  # CU_MEMORYTYPE_DEVICE
_MIN_ADDRESS = 1 << 16  # values below cannot be device addresses (sizes, flags)


class _Kernel:
    __slots__ = ("node", "params", "sizes", "buffers", "array", "dirty", "_set", "_ref")

    def __init__(self, node: int) -> None:
        self.node = node
        self.params = dg.KernelNodeParams()
        dg.call("cuGraphKernelNodeGetParams_v2", node, ctypes.byref(self.params))
        sizes = self.sizes = dg.param_sizes(self.params) if self.params.params else []
        self.buffers = [ctypes.create_string_buffer(
            ctypes.string_at(self.params.params[i], size), max(size, 8))
            for i, size in enumerate(sizes)]
        self.array = (ctypes.c_void_p * max(len(sizes), 1))(
            *[ctypes.addressof(b) for b in self.buffers])
        self.params.params = ctypes.cast(self.array, ctypes.POINTER(ctypes.c_void_p))
        self.dirty = False
        # bound once: a rebinding replay pushes each moved node with one foreign call
        self._set, self._ref = dg.lib().cuGraphExecKernelNodeSetParams_v2, ctypes.byref(
            self.params)

    def words(self):
        for i, (buf, size) in enumerate(zip(self.buffers, self.sizes)):
            raw = buf.raw
            for off in range(0, size - 7, 8):
                yield (i, off), _WORD.unpack_from(raw, off)[0]

    def write(self, where: tuple[int, int], value: int) -> None:
        i, off = where
        _WORD.pack_into(self.buffers[i], off, value)
        self.dirty = True

    def push(self, exe: int, context: int) -> None:
        status = self._set(exe, self.node, self._ref)
        if status:
            from ._driver import error_for

            raise error_for("cuGraphExecKernelNodeSetParams_v2", status, "replay")
        self.dirty = False


class _Memcpy:
    __slots__ = ("node", "params", "dirty")

    def __init__(self, node: int) -> None:
        self.node = node
        self.params = dg.Memcpy3D()
        dg.call("cuGraphMemcpyNodeGetParams", node, ctypes.byref(self.params))
        self.dirty = False

    def words(self):
        for side in ("src", "dst"):
            part = getattr(self.params, side)
            if part.memory_type == _DEVICE_MEMORY:
                yield side, part.device

    def write(self, where: str, value: int) -> None:
        getattr(self.params, where).device = value
        self.dirty = True

    def push(self, exe: int, context: int) -> None:
        dg.call("cuGraphExecMemcpyNodeSetParams", exe, self.node, ctypes.byref(self.params),
                context, op="replay")
        self.dirty = False


class _Memset:
    __slots__ = ("node", "params", "dirty")

    def __init__(self, node: int) -> None:
        self.node = node
        self.params = dg.MemsetParams()
        dg.call("cuGraphMemsetNodeGetParams", node, ctypes.byref(self.params))
        self.dirty = False

    def words(self):
        yield "dst", self.params.dst

    def write(self, where: str, value: int) -> None:
        self.params.dst = value
        self.dirty = True

    def push(self, exe: int, context: int) -> None:
        dg.call("cuGraphExecMemsetNodeSetParams", exe, self.node, ctypes.byref(self.params),
                context, op="replay")
        self.dirty = False


_KINDS: dict[int, Any] = {dg.NODE_KERNEL: _Kernel, dg.NODE_MEMCPY: _Memcpy,
                          dg.NODE_MEMSET: _Memset}


class NodeTable:
    """The address sites of one captured graph (see the module docstring)."""

    __slots__ = ("nodes", "_sites", "_moved")

    def __init__(self, graph: int) -> None:
        self.nodes = []
        self._moved: list = []  # the entries changed since the last push
        self._sites: list[tuple[Any, Any, int]] = []  # (node entry, where, original value)
        for node in dg.graph_nodes(graph):
            kind = _KINDS.get(dg.node_type(node))
            if kind is None:
                continue
            entry = kind(node)
            self.nodes.append(entry)
            for where, value in entry.words():
                if value >= _MIN_ADDRESS:
                    self._sites.append((entry, where, value))

    def sites(self, lo: int, hi: int) -> list[tuple[Any, Any, int]]:
        """The sites whose original value is an address in ``[lo, hi)``."""
        return [s for s in self._sites if lo <= s[2] < hi]

    def move(self, sites: list[tuple[Any, Any, int]], shift: int) -> None:
        """Set each site to its original value + ``shift`` (in this table's copies)."""
        moved = self._moved
        for entry, where, value in sites:
            if not entry.dirty:
                moved.append(entry)
            entry.write(where, value + shift)

    def push(self, exe: int, context: int) -> None:
        """Send the changed nodes to the executable graph (a node whose push fails stays
        changed, and the next push sends it again)."""
        moved = self._moved
        while moved:
            moved[-1].push(exe, context)
            moved.pop()
