"""Rebinding a graph's memory without copies: where a graph holds each address, and how a
replay moves it.

``NodeTable(graph)`` reads every node of a captured graph once: for a kernel node, its
parameters, copied into buffers this table owns (sizes from ``cuFuncGetParamInfo``); for a
memcpy or memset node, its parameter struct. Every 8-byte-aligned, 8-byte word of a kernel
parameter, and every device address of a memcpy or memset node, is a *site* that may hold
a device address. ``sites(lo, hi)`` lists the sites whose value lies in ``[lo, hi)``: the
view of a tensor the capture used. ``move(sites, shift)`` writes each site's original
value plus ``shift`` into the table's copies, and ``push(exe, entries, context)`` sends
those nodes into an executable graph (``cuGraphExec*NodeSetParams``), which only its next
launch sees.

``Executables`` keeps up to ``MAX_EXECS`` executable graphs of one captured graph, each
bound to one *placement* (the shift of every rebound tensor). A replay whose placement
one of them holds launches it as it is: no node is pushed. A placement seen for the
first time is pushed into the least recently used one (the only push a replay pays); one
seen again gets its own executable graph (instantiated once, while fewer than
``MAX_EXECS`` exist), so that a program cycling through a few sets of tensors replays
each with no update at all.

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
from .authority import Authority
from .errors import TenferroError, ValidationError
from .memo import BoundedCache
from .shapes.aliasing import byte_range

__all__ = ["NodeTable", "Executables", "MAX_EXECS", "written_keys", "check_placement",
           "allocation", "sites_of"]

_WORD = struct.Struct("<Q")
_DEVICE_MEMORY = 2  # CU_MEMORYTYPE_DEVICE
_MIN_ADDRESS = 1 << 16  # values below cannot be device addresses (sizes, flags)
MAX_EXECS = 8  # executable graphs per captured graph (the first one included)


class _Kernel:
    __slots__ = ("node", "params", "sizes", "buffers", "array", "_set", "_ref")

    def __init__(self, node: int) -> None:
        self.node = node
        self.params = dg.kernel_params(node)
        sizes = self.sizes = dg.param_sizes(self.params) if self.params.params else []
        self.buffers = [ctypes.create_string_buffer(
            ctypes.string_at(self.params.params[i], size), max(size, 8))
            for i, size in enumerate(sizes)]
        self.array = (ctypes.c_void_p * max(len(sizes), 1))(
            *[ctypes.addressof(b) for b in self.buffers])
        self.params.params = ctypes.cast(self.array, ctypes.POINTER(ctypes.c_void_p))
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

    def push(self, exe: int, context: int) -> None:
        status = self._set(exe, self.node, self._ref)
        if status:
            from ._driver import error_for

            raise error_for("cuGraphExecKernelNodeSetParams_v2", status, "replay")


class _Memcpy:
    __slots__ = ("node", "params")

    def __init__(self, node: int) -> None:
        self.node = node
        self.params = dg.Memcpy3D()
        dg.call("cuGraphMemcpyNodeGetParams", node, ctypes.byref(self.params))

    def words(self):
        for side in ("src", "dst"):
            part = getattr(self.params, side)
            if part.memory_type == _DEVICE_MEMORY:
                yield side, part.device

    def write(self, where: str, value: int) -> None:
        getattr(self.params, where).device = value

    def push(self, exe: int, context: int) -> None:
        dg.call("cuGraphExecMemcpyNodeSetParams", exe, self.node, ctypes.byref(self.params),
                context, op="replay")


class _Memset:
    __slots__ = ("node", "params")

    def __init__(self, node: int) -> None:
        self.node = node
        self.params = dg.MemsetParams()
        dg.call("cuGraphMemsetNodeGetParams", node, ctypes.byref(self.params))

    def words(self):
        yield "dst", self.params.dst

    def write(self, where: str, value: int) -> None:
        self.params.dst = value

    def push(self, exe: int, context: int) -> None:
        dg.call("cuGraphExecMemsetNodeSetParams", exe, self.node, ctypes.byref(self.params),
                context, op="replay")


_KINDS: dict[int, Any] = {dg.NODE_KERNEL: _Kernel, dg.NODE_MEMCPY: _Memcpy,
                          dg.NODE_MEMSET: _Memset}


class NodeTable:
    """The address sites of one captured graph (see the module docstring)."""

    __slots__ = ("nodes", "_sites")

    def __init__(self, graph: int) -> None:
        self.nodes = []
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
        for entry, where, value in sites:
            entry.write(where, value + shift)

    @staticmethod
    def push(exe: int, entries: Any, context: int) -> None:
        """Send ``entries`` (nodes, as this table holds them now) to the executable graph
        ``exe``."""
        for entry in entries:
            entry.push(exe, context)


class Executables(Authority):
    """The executable graphs of one captured graph, by placement (module docstring).

    ``sites_of(key)`` lists the sites of the tensor ``key``; ``keys`` are all such keys.
    A placement is a dict key -> nonzero shift. The first executable graph (``exe``,
    instantiated at capture) holds the empty placement until it is the least recently
    used one and a new placement needs it."""

    __slots__ = ("graph", "table", "keys", "sites_of", "limit", "_state", "_by", "_scratch",
                 "_seen")

    def __init__(self, graph: int, exe: int, table: NodeTable, keys: Any,
                 sites_of: Any) -> None:
        self.graph, self.table, self.keys, self.sites_of = graph, table, tuple(keys), sites_of
        self.limit = MAX_EXECS
        # exe -> its placement (None: unknown after a failed push); order = least recent first
        self._state: dict[int, dict[int, int] | None] = {exe: {}}
        self._by: dict[frozenset, int] = {frozenset(): exe}
        self._scratch: dict[int, int] = {}  # the placement the table's copies hold
        self._seen: BoundedCache[frozenset, int] = BoundedCache(256)  # placement -> times seen

    def handles(self) -> tuple[int, ...]:
        return tuple(self._state)

    def select(self, placement: dict[int, int], context: int,
               key: frozenset | None = None) -> int:
        """The executable graph to launch for ``placement`` (bound to it now if needed);
        ``key``: ``frozenset(placement.items())`` when the caller has it."""
        if key is None:
            key = frozenset(placement.items())
        exe = self._by.get(key)
        state = self._state
        if exe is not None:
            state[exe] = state.pop(exe)  # the most recently used now
            return exe
        seen = (self._seen.get(key) or 0) + 1
        self._seen.put(key, seen)
        exe = 0
        if (seen > 1 or len(state) == 1) and len(state) < self.limit:
            exe = self._instantiate()
        if not exe:
            exe = next(iter(state))  # the least recently used
        self._bind(exe, placement, key, context)
        return exe

    def _instantiate(self) -> int:
        try:
            exe = dg.instantiate(self.graph, "replay")
        except TenferroError:  # out of memory, or a graph the driver instantiates once
            self.limit = len(self._state)
            return 0
        self._state[exe] = {}
        return exe

    def _bind(self, exe: int, placement: dict[int, int], key: frozenset,
              context: int) -> None:
        """Move the table to ``placement`` and push the nodes ``exe`` holds otherwise."""
        state = self._state
        old = state.pop(exe)
        state[exe] = None  # unknown until every push succeeded
        if old is not None and self._by.get(frozenset(old.items())) == exe:
            del self._by[frozenset(old.items())]
        scratch, sites_of, table = self._scratch, self.sites_of, self.table
        for k in set(scratch) | set(placement):
            shift = placement.get(k, 0)
            if scratch.get(k, 0) != shift:
                table.move(sites_of(k), shift)
        self._scratch = dict(placement)
        changed = self.keys if old is None else \
            [k for k in set(old) | set(placement) if old.get(k, 0) != placement.get(k, 0)]
        entries: dict[int, Any] = {}
        for k in changed:
            for site in sites_of(k):
                entries[id(site[0])] = site[0]
        table.push(exe, entries.values(), context)
        state[exe] = dict(placement)
        self._by[key] = exe


# --- what a rebinding may move ------------------------------------------------------------

def allocation(t: Any) -> tuple[int, int]:
    """[low, high) device addresses of the allocation under the view ``t``: the addresses
    a rebinding of ``t`` moves (a kernel may hold a view by its allocation's base address
    and an offset, or by an end address)."""
    buf = t.base.buffer
    return buf.ptr, buf.ptr + buf.nbytes


def sites_of(cache: dict[int, list], external: dict[int, Any], table: NodeTable,
             key_id: int) -> list:
    """The node addresses a rebinding of the tensor ``key_id`` (of ``external``) moves:
    every one in its allocation (``check_placement`` makes sure no other tensor of the
    graph lies there outside its view); found once, kept in ``cache``."""
    sites = cache.get(key_id)
    if sites is None:
        lo, hi = allocation(external[key_id])
        sites = cache[key_id] = table.sites(lo, hi)
    return sites


def written_keys(external: dict[int, Any], written: set[int]) -> set[int]:
    """The tensors the capture was given whose memory the graph writes: the outputs, and
    every other tensor over memory an output addresses (an in-place ``add_into(x, b, out)``
    whose ``out`` is another Tensor over ``x``'s buffer; a view of ``x`` a later op
    writes). Memory is compared, never objects (``shapes/aliasing.py``)."""
    spans = {key: byte_range(t) for key, t in external.items()}
    outs = [spans[key] for key in written if key in spans]
    return {key for key, (lo, hi) in spans.items()
            if key in written or any(lo < ohi and olo < hi for olo, ohi in outs)}


def check_placement(g: Any, moved: dict[int, int], op: str) -> None:
    """The checks a placement passes once (``CudaGraph._rebind``; ``g`` is the graph):
    each moved tensor's addresses can be told apart, no moved view meets graph memory or
    another tensor of the graph it did not meet when captured, and no captured scalar
    operand has the bits of an address to move."""
    for key_id, shift in moved.items():
        if shift and _tangled(g, key_id):
            raise ValidationError(
                "this tensor shares its allocation with another tensor of the graph that "
                "is not inside its view, so the graph's addresses in that allocation "
                "cannot be told apart: rebind a tensor over the whole allocation, or "
                "capture with tensors of their own", op=op)
    _check_overlap(g._spans, g._memory.blocks, moved, op)
    if g._scalars:
        for key_id, shift in moved.items():
            if shift and any(site[2] in g._scalars for site in g._sites_of(key_id)):
                raise ValidationError(
                    "a scalar operand captured in this graph has the bits of an address "
                    "inside a tensor to rebind, and the graph cannot tell the two apart: "
                    "pass that value as a tensor, or capture again", op=op)


def _tangled(g: Any, key_id: int) -> bool:
    """Whether another tensor of the graph shares the allocation of the tensor ``key_id``
    without lying inside its view: then an address in the allocation cannot be told to
    belong to one or the other (a kernel may hold either by the allocation's base
    address)."""
    key = g._external[key_id]
    lo, hi = g._spans[key_id]
    blo, bhi = allocation(key)
    for other_id, other in g._external.items():
        if other_id == key_id:
            continue
        olo, ohi = allocation(other)
        if olo < bhi and blo < ohi:
            vlo, vhi = g._spans[other_id]
            if vlo < vhi and not (lo <= vlo and vhi <= hi):
                return True
    return False


def _check_overlap(spans: dict[int, tuple[int, int]], blocks: Any, moved: dict[int, int],
                   op: str) -> None:
    """A rebound view must not meet graph memory, nor another tensor of the graph it did
    not meet when captured."""
    for key_id, shift in moved.items():
        if not shift:
            continue
        lo, hi = spans[key_id]
        nlo, nhi = lo + shift, hi + shift
        for ptr, nbytes in blocks:
            if nlo < ptr + nbytes and ptr < nhi:
                raise ValidationError("a rebound tensor overlaps memory the graph owns",
                                      op=op)
        for other, (olo, ohi) in spans.items():
            if other == key_id or (lo < ohi and olo < hi):
                continue
            oshift = moved.get(other, 0)
            if nlo < ohi + oshift and olo + oshift < nhi:
                raise ValidationError("a rebound tensor overlaps another tensor of the "
                                      "graph that it did not overlap when captured", op=op)
