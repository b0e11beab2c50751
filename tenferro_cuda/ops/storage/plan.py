"""Kernel plans for permutation copies ``dst[...] = src[...]`` (pure Python, no device).

``plan_copy`` turns two strided layouts of one shape into one launch of ``ptx/permute.cu``:

1. Canonicalise: drop extent-1 axes; flip every axis whose destination stride is
   negative (in both layouts at once, which permutes the index space identically); sort
   the axes by destination stride, largest first; merge neighbours that are contiguous in
   both layouts. The last axis ``k`` is now the destination-fastest axis.
2. Choose: ``j`` is the axis with the smallest nonzero |source stride| (``k`` on ties).
   If ``j == k`` (or the source does not move along ``k``: stride 0), every destination
   row is a source run with one stride: ``permute_rows``, with V-element vector stores
   when the destination rows allow them (16 bytes when aligned) and vector loads when the
   source runs are contiguous and aligned. Otherwise ``permute_tiled``: T x T tiles over
   (j, k), the remaining axes enumerated by the tile index.
3. Pack the plan struct (``RowPlan`` / ``TilePlan`` of ``ptx/include/tenferro/permute.cuh``)
   in the index type: ``tf::u32`` when both buffers hold at most ``U32_LIMIT`` elements
   (strides packed modulo 2^32; offsets stay exact), else ``tf::u64``.

Plans are cached by layout, so a repeated call costs one dictionary lookup.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ...kernels.families.permute import ROW_VECTORS, TILE, row_expression, tiled_expression
from ...memo import BoundedCache

THREADS = 256
ROW_UNROLL = 4  # TF_ROW_UNROLL in permute.cu
ROW_RANK = 7  # TF_ROW_RANK
TILE_RANK = 6  # TF_TILE_RANK
MAX_GRID_X = (1 << 31) - 1
MAX_GRID_Y = 65535
# Below this many elements per buffer the kernels index in 32 bits; the margin keeps the
# in-kernel column and row counters (base + one chunk) from wrapping.
U32_LIMIT = (1 << 32) - (1 << 20)

_ROW_FMT = {"tf::u32": "<21I6I4i4x", "tf::u64": "<21Q6Q4i"}
_TILE_FMT = {"tf::u32": "<18I10IQ2i", "tf::u64": "<18Q10QQ2i"}
ROW_PLAN_SIZE = {k: struct.calcsize(v) for k, v in _ROW_FMT.items()}
TILE_PLAN_SIZE = {k: struct.calcsize(v) for k, v in _TILE_FMT.items()}


@dataclass(frozen=True)
class Operand:
    """One side of a copy: element strides and offset, the element count of its buffer,
    and the alignment in bytes (a power of two, at most 16) of the buffer's address."""

    strides: tuple[int, ...]
    offset: int
    base_size: int
    align: int


@dataclass(frozen=True)
class CopyPlan:
    kind: str  # "rows" or "tiled"
    expression: str  # NVRTC name expression in the "permute" family
    index: str  # "tf::u32" or "tf::u64"
    grid: tuple[int, int, int]
    params: bytes  # the packed RowPlan / TilePlan
    vector: int  # elements per vector access (rows: stores; tiled: fast tiles)
    fast: bool  # rows: vector loads; tiled: full tiles take the vector path
    axes: tuple[int, ...]  # canonical shape
    src_strides: tuple[int, ...]
    dst_strides: tuple[int, ...]
    itemsize: int = 0
    tile_axes: tuple[int, int] | None = None  # (j, k) for tiled plans

    @property
    def codes(self) -> str:
        return f"PPS{len(self.params)}"


def alignment(address: int) -> int:
    """The largest power of two <= 16 dividing ``address``."""
    return 16 if address % 16 == 0 else address & -address


def canonicalize(shape: Sequence[int], ss: Sequence[int], so: int, ds: Sequence[int],
                 do: int):
    """(shape, src strides, src offset, dst strides, dst offset) in canonical form."""
    axes = []
    for n, s, d in zip(shape, ss, ds):
        if n == 1:
            continue
        if d < 0:
            so += (n - 1) * s
            do += (n - 1) * d
            s, d = -s, -d
        axes.append((n, s, d))
    axes.sort(key=lambda a: (a[2], abs(a[1])), reverse=True)
    merged: list[tuple[int, int, int]] = []
    for n, s, d in axes:
        if merged and merged[-1][2] == d * n and merged[-1][1] == s * n:
            merged[-1] = (merged[-1][0] * n, s, d)
        else:
            merged.append((n, s, d))
    return (tuple(a[0] for a in merged), tuple(a[1] for a in merged), so,
            tuple(a[2] for a in merged), do)


def index_type(src: Operand, dst: Operand) -> str:
    return "tf::u32" if max(src.base_size, dst.base_size) <= U32_LIMIT else "tf::u64"


def plan_copy(shape: Sequence[int], src: Operand, dst: Operand, itemsize: int):
    """The launch for ``dst = src`` over ``shape`` (``math.prod(shape) > 0``), or None when
    the tile count exceeds the 1-D grid (then the caller uses the generic strided copy)."""
    return cached_plan((tuple(shape), src.strides, src.offset, src.base_size, src.align,
                        dst.strides, dst.offset, dst.base_size, dst.align, itemsize))


def cached_plan(key: tuple):
    """``plan_copy`` keyed by the flat tuple (shape, src strides, src offset, src base
    size, src align, dst strides, dst offset, dst base size, dst align, itemsize)."""
    plan = _CACHE.get(key, _MISSING)
    if plan is _MISSING:
        shape, ss, so, sb, sa, ds, do, db, da, itemsize = key
        plan = _CACHE.put(key, _plan(shape, Operand(ss, so, sb, sa), Operand(ds, do, db, da),
                                     itemsize))
    return plan


_CACHE: BoundedCache = BoundedCache(512)
_MISSING = object()


def _plan(shape, src: Operand, dst: Operand, itemsize: int):
    n, ss, so, ds, do = canonicalize(shape, src.strides, src.offset, dst.strides, dst.offset)
    index = index_type(src, dst)
    if not n:
        return _rows(n, ss, so, ds, do, src, dst, itemsize, index)
    k = len(n) - 1
    moving = [a for a in range(len(n)) if ss[a] != 0]
    if not moving or ss[k] == 0:
        return _rows(n, ss, so, ds, do, src, dst, itemsize, index)
    j = min(moving, key=lambda a: (abs(ss[a]), a != k))
    if j == k:
        return _rows(n, ss, so, ds, do, src, dst, itemsize, index)
    return _tiled(n, ss, so, ds, do, j, src, dst, itemsize, index)


def _pow2_at_least(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


def _wrap(values: Sequence[int], width: int, index: str) -> list[int]:
    mask = (1 << 32) - 1 if index == "tf::u32" else (1 << 64) - 1
    return [v & mask for v in values] + [0] * (width - len(values))


def _rows(n, ss, so, ds, do, src: Operand, dst: Operand, size: int, index: str) -> CopyPlan:
    if n:
        cols, sst, dst_inner = n[-1], ss[-1], ds[-1]
        outer, oss, ods = n[:-1], ss[:-1], ds[:-1]
    else:  # a single element
        cols, sst, dst_inner, outer, oss, ods = 1, 0, 1, (), (), ()
    vector = 1
    for v in ROW_VECTORS[size]:
        if v == 1 or (dst_inner == 1 and cols % v == 0 and do % v == 0
                      and all(d % v == 0 for d in ods) and dst.align % (v * size) == 0):
            vector = v
            break
    svec = (vector > 1 and sst == 1 and so % vector == 0
            and all(s % vector == 0 for s in oss) and src.align % (vector * size) == 0)
    cvec = cols // vector
    tpr = min(THREADS, _pow2_at_least(-(-cvec // ROW_UNROLL)))
    rows = math.prod(outer)
    rpb = THREADS // tpr
    grid = (-(-cvec // (tpr * ROW_UNROLL)), min(-(-rows // rpb), MAX_GRID_Y), 1)
    fields = (_wrap(outer, ROW_RANK, index) + _wrap(oss, ROW_RANK, index)
              + _wrap(ods, ROW_RANK, index)
              + _wrap((rows, cols, sst, dst_inner, so, do), 6, index)
              + [len(outer), tpr.bit_length() - 1, int(svec), 0])
    params = struct.pack(_ROW_FMT[index], *fields)
    return CopyPlan("rows", row_expression(size, vector, index), index, grid, params, vector,
                    svec, tuple(n), tuple(ss), tuple(ds), size)


def _tiled(n, ss, so, ds, do, j: int, src: Operand, dst: Operand, size: int,
           index: str) -> CopyPlan | None:
    k = len(n) - 1
    vector, tile = TILE[size]
    rest = [a for a in range(len(n)) if a not in (j, k)]
    ext = [n[a] for a in rest]
    rss = [ss[a] for a in rest]
    rds = [ds[a] for a in rest]
    ntj, ntk = -(-n[j] // tile), -(-n[k] // tile)
    ntiles = ntj * ntk * math.prod(ext)
    if ntiles > MAX_GRID_X:
        return None
    vec = (ss[j] == 1 and ds[k] == 1 and so % vector == 0 and do % vector == 0
           and ss[k] % vector == 0 and ds[j] % vector == 0
           and all(s % vector == 0 for s in rss) and all(d % vector == 0 for d in rds)
           and src.align % (vector * size) == 0 and dst.align % (vector * size) == 0)
    fields = (_wrap(ext, TILE_RANK, index) + _wrap(rss, TILE_RANK, index)
              + _wrap(rds, TILE_RANK, index)
              + _wrap((n[j], n[k], ss[j], ss[k], ds[j], ds[k], so, do, ntj, ntk), 10, index)
              + [ntiles, len(ext), int(vec)])
    params = struct.pack(_TILE_FMT[index], *fields)
    return CopyPlan("tiled", tiled_expression(size, index), index, (ntiles, 1, 1), params,
                    vector, vec, tuple(n), tuple(ss), tuple(ds), size, (j, k))


# --- tril / triu -----------------------------------------------------------------------
_TRI_FMT = {"tf::u32": "<18Iq2i", "tf::u64": "<18Qq2i"}
TRI_PLAN_SIZE = {k: struct.calcsize(v) for k, v in _TRI_FMT.items()}


def plan_tri(shape: Sequence[int], src: Operand, k: int, upper: bool, index: str) -> bytes:
    """The packed ``TriPlan`` of a mask copy of ``src`` (rank >= 2) into a compact output."""
    batch = [(n, s) for n, s in zip(shape[:-2], src.strides[:-2]) if n != 1]
    merged: list[tuple[int, int]] = []
    for n, s in batch:
        if merged and merged[-1][1] == s * n:
            merged[-1] = (merged[-1][0] * n, s)
        else:
            merged.append((n, s))
    rows, cols = shape[-2], shape[-1]
    kk = max(min(k, 1 << 62), -(1 << 62))
    fields = (_wrap([m[0] for m in merged], TILE_RANK, index)
              + _wrap([m[1] for m in merged], TILE_RANK, index)
              + _wrap((rows, cols, src.strides[-2], src.strides[-1], src.offset,
                       math.prod(shape)), 6, index)
              + [kk, len(merged), int(upper)])
    return struct.pack(_TRI_FMT[index], *fields)
