"""Launch plans of gather and scatter: which kernel path serves a validated call, and its
packed arguments. Pure Python over shapes, strides and device addresses (ints), so every
decision is tested on the CPU.

Views enter as ``(data_ptr, strides)`` pairs: the pointer already includes the view's
element offset, so every layout built here has offset 0. Struct images match
``ptx/include/tenferro/index.cuh``: ``IndexMap`` (144 bytes) and ``Geometry`` (three
``tf::Layout``: a, b, c).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ...kernels.args import LAYOUT_SIZE, MAX_RANK, layout_bytes
from ...kernels.families.gather import UNIT_OF_SIZE
from ...kernels.families.scatter import ADD_VEC, CLAIM_UNIT, OPS, add_vectors
from ...tensor import is_row_major
from .._layout import coalesce

BLOCK = 256
_MAP = struct.Struct(f"<{MAX_RANK}q{MAX_RANK}qqii")
MAP_CODE = f"S{_MAP.size}"
GEOMETRY_CODE = f"S{3 * LAYOUT_SIZE}"
NO_MAP = _MAP.pack(*([0] * (2 * MAX_RANK)), 0, 0, 0)
SCALAR_UNROLL = 8
ROW_UNROLL = 4  # ptx/gather.cu
ROW_MIN_UNITS = 512  # shorter rows go element by element
# scatter_add marks the result's L2 lines evict_last (then demotes them) for results of at
# least KEEP_MIN_BYTES with at least KEEP_MIN_PER_LINE updates per 128-byte line: smaller
# results stay in L2 anyway, and sparser scatters would pay more for the demotion pass
# (one instruction per line) than they gain. Only the 64 MiB, 128 updates/line case was
# measured (H200: 369 -> 382 GB/s with evict-first loads; see ptx/scatter.cu).
KEEP_MIN_BYTES = 4 << 20
KEEP_MIN_PER_LINE = 4
L2_LINE = 128


@dataclass(frozen=True)
class Launch:
    """One kernel launch: the registered instantiation, its argument codes and values."""

    family: str
    expression: str
    codes: str
    args: tuple
    grid: tuple[int, int, int]
    block: int = BLOCK


def index_map(strides: Sequence[int], his: Sequence[int], ivs: int, wide: bool) -> bytes:
    """A packed ``tf::IndexMap`` of ``len(strides)`` components."""
    k = len(strides)
    pad = (0,) * (MAX_RANK - k)
    return _MAP.pack(*strides, *pad, *his, *pad, ivs, k, 1 if wide else 0)


def index_code(n: int) -> tuple[str, str]:
    """(C++ index type, ArgPack code) for a grid-stride loop over ``n`` items."""
    return ("tf::u32", "I") if n < (1 << 31) else ("tf::u64", "Q")


def is_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Row-major compact strides, ignoring extent-1 axes (the offset does not matter)."""
    return is_row_major(shape, strides)


def compact(shape: Sequence[int]) -> tuple[int, ...]:
    out, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= max(shape[i], 1)
    return tuple(out)


def geometry(shape: Sequence[int], a: Sequence[int], b: Sequence[int],
             c: Sequence[int] | None = None) -> bytes:
    """A packed ``tf::Geometry`` (layouts a, b, c) over the coalesced ``shape``."""
    c = (0,) * len(shape) if c is None else c
    cshape, strides = coalesce(shape, a, b, c)
    return b"".join(layout_bytes(cshape, st) for st in strides)


def grid_1d(n: int, per_block: int, sms: int, cap_per_sm: int = 32) -> tuple[int, int, int]:
    return (max(1, min(-(-n // per_block), sms * cap_per_sm)), 1, 1)


def best_unit(itemsize: int, extent: int, multiples: Sequence[int],
              pointers: Sequence[int]) -> int:
    """Largest unit of 1..16 bytes (>= itemsize) that ``extent`` elements, every stride in
    ``multiples`` and every address in ``pointers`` allow."""
    for unit in (16, 8, 4, 2, 1):
        if unit < itemsize:
            break
        g = unit // itemsize
        if extent % g == 0 and all(m % g == 0 for m in multiples) \
                and all(p % unit == 0 for p in pointers):
            return unit
    return itemsize


# --- gather -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GatherArgs:
    """A validated gather in plain numbers (see shapes.gather.GatherDims)."""

    itemsize: int
    operand: tuple[int, Sequence[int], Sequence[int]]  # (data_ptr, shape, strides)
    indices: tuple[int, Sequence[int], Sequence[int]]
    wide: bool
    out_ptr: int
    result_shape: tuple[int, ...]
    offset_dims: tuple[int, ...]
    batch_dims: tuple[int, ...]
    index_batch_dims: tuple[int, ...]
    window_dims: tuple[int, ...]
    slice_sizes: tuple[int, ...]
    start_index_map: tuple[int, ...]
    index_vector_dim: int
    operand_batching_dims: tuple[int, ...]
    index_batching_dims: tuple[int, ...]


def start_map(g: GatherArgs, ivs: int, unit_elems: int = 1) -> bytes:
    _, oshape, ost = g.operand
    strides = [ost[d] // unit_elems for d in g.start_index_map]
    his = [oshape[d] - g.slice_sizes[d] for d in g.start_index_map]
    return index_map(strides, his, ivs, g.wide)


def _batching_strides(g: GatherArgs) -> list[int]:
    """Per index batch axis: the operand stride of its batching partner (0 if none)."""
    ost = g.operand[2]
    pair = dict(zip(g.index_batching_dims, g.operand_batching_dims))
    return [ost[pair[d]] if d in pair else 0 for d in g.index_batch_dims]


def scalar_gather(g: GatherArgs) -> bool:
    """Every window is one element and the index vectors are compact, in result order."""
    _, ishape, ist = g.indices
    k = len(g.start_index_map)
    return (all(s == 1 for s in g.slice_sizes) and not g.operand_batching_dims
            and is_dense(ishape, ist) and (k <= 1 or g.index_vector_dim == len(ishape) - 1))


def gather_launch(g: GatherArgs, sms: int) -> Launch:
    """The fastest one-launch path that serves ``g``: scalar, rows or general."""
    n = math.prod(g.result_shape)
    if scalar_gather(g):
        unit = UNIT_OF_SIZE[g.itemsize]
        per = BLOCK * (SCALAR_UNROLL // 2 if g.itemsize == 16 else SCALAR_UNROLL)
        return Launch("gather", f"tf::gather_scalar<{unit}>", f"PPqP{MAP_CODE}q",
                      (g.out_ptr, g.operand[0], 0, g.indices[0], start_map(g, 1), n),
                      grid_1d(n, per, sms, 64))
    rows = _gather_rows(g, sms)
    if rows is not None:
        return rows
    return _gather_general(g, sms)


def row_group(units: int) -> int:
    """Threads per row in gather_rows: each keeps up to ROW_UNROLL (4) units in flight."""
    per_thread = -(-units // ROW_UNROLL)
    return min(32, 1 << max(0, (per_thread - 1).bit_length()))


def _gather_rows(g: GatherArgs, sms: int) -> Launch | None:
    r, nw = len(g.result_shape), len(g.window_dims)
    if g.offset_dims != tuple(range(r - nw, r)):
        return None
    optr, _, ost = g.operand
    wshape = [g.slice_sizes[d] for d in g.window_dims]
    cshape, (cst,) = coalesce(wshape, [ost[d] for d in g.window_dims])
    if len(cshape) > 1 or (cshape and cst[0] != 1):
        return None
    width = math.prod(wshape)
    _, ishape, ist = g.indices
    bshape = g.result_shape[:r - nw]
    astr = _batching_strides(g)
    bstr = [ist[d] for d in g.index_batch_dims]
    sim_strides = [ost[d] for d in g.start_index_map]
    unit = best_unit(g.itemsize, width, sim_strides + astr, (optr, g.out_ptr))
    ge = unit // g.itemsize
    units = width // ge
    bs, (ca, cb) = coalesce(bshape, [s // ge for s in astr], bstr)
    ivs = ist[g.index_vector_dim] if g.index_vector_dim < len(ishape) else 0
    group = row_group(units)
    nrows = math.prod(bshape)
    return Launch("gather", f"tf::gather_rows<{UNIT_OF_SIZE[unit]}>", f"PPLLP{MAP_CODE}qqi",
                  (g.out_ptr, optr, layout_bytes(bs, ca), layout_bytes(bs, cb), g.indices[0],
                   start_map(g, ivs, ge), nrows, units, group),
                  grid_1d(nrows * group, BLOCK, sms, 32))


def _gather_general(g: GatherArgs, sms: int) -> Launch:
    _, ishape, ist = g.indices
    ost = g.operand[2]
    a = [0] * len(g.result_shape)
    b = [0] * len(g.result_shape)
    for rd, od in zip(g.offset_dims, g.window_dims):
        a[rd] = ost[od]
    for rd, idim, bat in zip(g.batch_dims, g.index_batch_dims, _batching_strides(g)):
        a[rd] = bat
        b[rd] = ist[idim]
    n = math.prod(g.result_shape)
    itype, icode = index_code(n)
    ivs = ist[g.index_vector_dim] if g.index_vector_dim < len(ishape) else 0
    return Launch("gather", f"tf::gather_general<{UNIT_OF_SIZE[g.itemsize]}, {itype}>",
                  f"PP{GEOMETRY_CODE}P{MAP_CODE}{icode}",
                  (g.out_ptr, g.operand[0], geometry(g.result_shape, a, b), g.indices[0],
                   start_map(g, ivs), n),
                  grid_1d(n, BLOCK, sms, 16))


# --- scatter ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScatterArgs:
    """A validated scatter in plain numbers (see shapes.scatter.ScatterDims)."""

    ctype: str  # the dtype's C++ type (arithmetic combiners)
    itemsize: int
    out_shape: tuple[int, ...]  # compact result, a copy of the operand
    out_ptr: int
    updates: tuple[int, Sequence[int]]  # (data_ptr, shape), compact
    indices: tuple[int, Sequence[int], Sequence[int]]
    wide: bool
    update_window_dims: tuple[int, ...]
    update_scatter_dims: tuple[int, ...]
    index_batch_dims: tuple[int, ...]
    window_dims: tuple[int, ...]
    window_sizes: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    index_vector_dim: int
    input_batching_dims: tuple[int, ...]
    index_batching_dims: tuple[int, ...]

    @property
    def windows(self) -> int:
        return math.prod(self.updates[1][d] for d in self.update_scatter_dims)


def scatter_passes(combiner: str, unique: bool, windows: int) -> tuple[str, ...]:
    """Kernel passes of a combiner: replace with possible duplicates claims then commits."""
    if combiner != "replace":
        return (combiner,)
    return ("store",) if unique or windows <= 1 else ("claim", "commit")


def _scalar_path(s: ScatterArgs) -> bool:
    """Windows of one element, no batching, compact index vectors (scatter_scalar/add)."""
    _, ishape, ist = s.indices
    k = len(s.scatter_dims_to_operand_dims)
    return (all(s.updates[1][d] == 1 for d in s.update_window_dims)
            and not s.input_batching_dims and is_dense(ishape, ist)
            and (k <= 1 or s.index_vector_dim == len(ishape) - 1))


def keeps_l2(s: ScatterArgs, op: str, arch: int) -> bool:
    """Whether the ``op`` pass uses evict_last reductions (then ``l2_normal_launch``)."""
    nbytes = math.prod(s.out_shape) * s.itemsize
    return (op == "add" and arch >= 80 and _scalar_path(s) and nbytes >= KEEP_MIN_BYTES
            and math.prod(s.updates[1]) * L2_LINE >= KEEP_MIN_PER_LINE * nbytes)


def l2_normal_launch(s: ScatterArgs, sms: int) -> Launch:
    """Demote the result's L2 lines to normal priority (after a keeps_l2 pass)."""
    nbytes = math.prod(s.out_shape) * s.itemsize
    return Launch("scatter", "tf::scatter_l2_normal", "Pq", (s.out_ptr, nbytes),
                  grid_1d(-(-nbytes // L2_LINE), BLOCK, sms, 16))


def _scatter_add(s: ScatterArgs, strides, his, arch: int, sms: int) -> Launch:
    n = math.prod(s.updates[1])
    align = min(16, ADD_VEC * s.itemsize)
    vec = (len(strides) == 1 and s.indices[0] % 16 == 0 and s.updates[0] % align == 0)
    tile = BLOCK * ADD_VEC * add_vectors(s.itemsize)
    return Launch("scatter", f"tf::scatter_add<{s.ctype}>", f"PPP{MAP_CODE}qii",
                  (s.out_ptr, s.updates[0], s.indices[0], index_map(strides, his, 1, s.wide),
                   n, 1 if vec else 0, 1 if keeps_l2(s, "add", arch) else 0),
                  grid_1d(n, tile, sms, 1024))


def scatter_launch(s: ScatterArgs, op: str, winner: int, wide_key: bool, sms: int,
                   arch: int = 0) -> Launch:
    """The launch of one pass ``op`` (a key of kernels.families.scatter.OPS); ``arch``
    (e.g. 90) enables the L2 policy of ``add`` (``keeps_l2``)."""
    ostr = compact(s.out_shape)
    _, ishape, ist = s.indices
    irank = len(ishape)
    his = [s.out_shape[d] - s.window_sizes[d] for d in s.scatter_dims_to_operand_dims]
    strides = [ostr[d] for d in s.scatter_dims_to_operand_dims]
    if op in ("add", "max", "min"):
        t = s.ctype
    else:
        t = CLAIM_UNIT if op == "claim" else UNIT_OF_SIZE[s.itemsize]
    targs = f"{t}, {OPS[op]}"
    n = math.prod(s.updates[1])
    tail = (winner, 1 if wide_key else 0)
    if _scalar_path(s):
        if op == "add":
            return _scatter_add(s, strides, his, arch, sms)
        return Launch("scatter", f"tf::scatter_scalar<{targs}>", f"PPP{MAP_CODE}qPi",
                      (s.out_ptr, s.updates[0], s.indices[0], index_map(strides, his, 1, s.wide),
                       n) + tail, grid_1d(n, BLOCK * 4, sms, 64))
    ushape = s.updates[1]
    a, b, c = [0] * len(ushape), [0] * len(ushape), [0] * len(ushape)
    for ud, od in zip(s.update_window_dims, s.window_dims):
        a[ud] = ostr[od]
    pair = dict(zip(s.index_batching_dims, s.input_batching_dims))
    key = compact([ushape[d] for d in s.update_scatter_dims])
    for j, (ud, idim) in enumerate(zip(s.update_scatter_dims, s.index_batch_dims)):
        a[ud] = ostr[pair[idim]] if idim in pair else 0
        b[ud] = ist[idim]
        c[ud] = key[j]
    itype, icode = index_code(n)
    ivs = ist[s.index_vector_dim] if s.index_vector_dim < irank else 0
    return Launch("scatter", f"tf::scatter_general<{targs}, {itype}>",
                  f"PP{GEOMETRY_CODE}P{MAP_CODE}{icode}Pi",
                  (s.out_ptr, s.updates[0], geometry(ushape, a, b, c), s.indices[0],
                   index_map(strides, his, ivs, s.wide), n) + tail,
                  grid_1d(n, BLOCK, sms, 16))
