"""The permutation-copy planner (no device): path choice, tile axes, vector widths, index
type, struct packing, and the packed plans *executed in Python* exactly as the kernels in
ptx/permute.cu index them (row decomposition, tile numbering, modular offsets), which must
map every destination element to its source element once.
"""

from __future__ import annotations

import itertools
import math
import re
import struct

import numpy as np
import pytest

from tenferro_cuda.kernels.families.permute import ROW_VECTORS, TILE
from tenferro_cuda.kernels.registry import INCLUDE_DIR
from tenferro_cuda.ops.storage import plan as sp
from tenferro_cuda.tensor import compact_strides

U32, U64 = "tf::u32", "tf::u64"


def operand(strides, offset=0, base=None, align=256, shape=None):
    if base is None:
        base = 1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides)) + offset
    return sp.Operand(tuple(strides), offset, base, sp.alignment(align))


def transpose_plan(shape, perm, itemsize=4, **kw):
    cs = compact_strides(shape)
    out = tuple(shape[p] for p in perm)
    src = operand([cs[p] for p in perm], shape=out, **kw)
    dst = operand(compact_strides(out), shape=out)
    return out, src, dst, sp._plan(out, src, dst, itemsize)


# --- executing a packed plan --------------------------------------------------------------
def _mask(index):
    return (1 << 32) - 1 if index == U32 else (1 << 64) - 1


def run_rows(plan: sp.CopyPlan):
    f = struct.unpack(sp._ROW_FMT[plan.index], plan.params)
    ext, ss, ds = f[0:7], f[7:14], f[14:21]
    rows, cols, sst, dstride, soff, doff, nd, tpr_log2, svec = f[21:30]
    m = _mask(plan.index)
    v = plan.vector
    tpr = 1 << tpr_log2
    gx, gy, _ = plan.grid
    assert gx * tpr * sp.ROW_UNROLL * v >= cols and gy >= 1 and gy <= sp.MAX_GRID_Y
    pairs = []
    for r in range(rows):
        t, so, do = r, soff, doff
        for d in range(nd - 1, -1, -1):
            i, t = t % ext[d], t // ext[d]
            so, do = (so + i * ss[d]) & m, (do + i * ds[d]) & m
        c = np.arange(cols, dtype=object)
        pairs += zip([(do + x * dstride) & m for x in c], [(so + x * sst) & m for x in c])
        if v > 1:  # vector stores: dst run contiguous and every vector aligned
            assert dstride == 1 and do % v == 0 and cols % v == 0
        if svec:
            assert sst == 1 and so % v == 0
    return pairs


def run_tiled(plan: sp.CopyPlan):
    f = struct.unpack(sp._TILE_FMT[plan.index], plan.params)
    ext, ss, ds = f[0:6], f[6:12], f[12:18]
    nj, nk, sj, sk, dj, dk, soff, doff, ntj, ntk, ntiles, nd, vec = f[18:31]
    m = _mask(plan.index)
    v, tsize = TILE[plan.itemsize]
    assert plan.grid == (ntiles, 1, 1) and ntiles == ntj * ntk * math.prod(ext[:nd])
    pairs = []
    for tile in range(ntiles):
        t = tile
        tk, t = t % ntk, t // ntk
        tj, t = t % ntj, t // ntj
        sb, db = soff, doff
        for d in range(nd - 1, -1, -1):
            i, t = t % ext[d], t // ext[d]
            sb, db = (sb + i * ss[d]) & m, (db + i * ds[d]) & m
        j0, k0 = tj * tsize, tk * tsize
        sb, db = (sb + j0 * sj + k0 * sk) & m, (db + j0 * dj + k0 * dk) & m
        full = vec and nj - j0 >= tsize and nk - k0 >= tsize
        if full:  # the fast path's vector accesses
            assert sj == 1 and dk == 1 and sb % v == 0 and db % v == 0
            assert sk % v == 0 and dj % v == 0
        for jj in range(min(tsize, nj - j0)):
            for kk in range(min(tsize, nk - k0)):
                pairs.append(((db + jj * dj + kk * dk) & m, (sb + jj * sj + kk * sk) & m))
    return pairs


def expected_pairs(shape, src, dst):
    pairs = []
    for idx in itertools.product(*(range(n) for n in shape)):
        d = dst.offset + sum(i * s for i, s in zip(idx, dst.strides))
        s = src.offset + sum(i * s for i, s in zip(idx, src.strides))
        pairs.append((d, s))
    return sorted(pairs)


def check_plan(shape, src, dst, itemsize):
    plan = sp._plan(shape, src, dst, itemsize)
    got = run_rows(plan) if plan.kind == "rows" else run_tiled(plan)
    assert sorted(got) == expected_pairs(shape, src, dst)
    return plan


# --- every permutation of rank 4, and random views ---------------------------------------
@pytest.mark.parametrize("itemsize", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("perm", list(itertools.permutations(range(4))), ids=str)
def test_rank4_permutations_map_every_element(perm, itemsize):
    out, src, dst, _ = transpose_plan((3, 5, 7, 2), perm, itemsize)
    check_plan(out, src, dst, itemsize)


def random_case(rng):
    rank = int(rng.integers(0, 6))
    shape = [int(rng.choice([1, 2, 3, 5, 9, 33, 65])) for _ in range(rank)]
    while math.prod(shape) > 3000:
        shape[int(rng.integers(0, rank))] = 2
    steps = [int(rng.choice([1, 1, 2, -1, -3, 0])) if rng.random() < 0.5 else 1 for _ in shape]
    cs = compact_strides([n * max(abs(st), 1) for n, st in zip(shape, steps)])
    ss = [c * st for c, st in zip(cs, steps)]
    so = sum((n - 1) * -s for n, s in zip(shape, ss) if s < 0) + int(rng.integers(0, 3))
    perm = list(rng.permutation(rank))
    shape = [shape[p] for p in perm]
    ss = [ss[p] for p in perm]
    dcs = compact_strides(shape)
    flips = [rng.random() < 0.3 for _ in shape]
    ds = [-c if f else c for c, f in zip(dcs, flips)]
    do = sum((n - 1) * c for n, c, f in zip(shape, dcs, flips) if f)
    wide = rng.random() < 0.2
    src = sp.Operand(tuple(ss), so, (1 << 40) if wide else 10**6, int(rng.choice([4, 8, 16])))
    dst = sp.Operand(tuple(ds), do, max(math.prod(shape), 1), int(rng.choice([4, 16])))
    return shape, src, dst, int(rng.choice([1, 2, 4, 8, 16]))


@pytest.mark.parametrize("seed", range(40))
def test_random_views_map_every_element(seed):
    shape, src, dst, itemsize = random_case(np.random.default_rng(seed))
    if math.prod(shape):
        check_plan(shape, src, dst, itemsize)


# --- path choice --------------------------------------------------------------------------
CHOICE = [
    # (shape, perm, itemsize, kind, vector, fast)
    ((16384, 16384), (1, 0), 4, "tiled", 4, True),
    ((64, 64, 256, 256), (0, 1, 3, 2), 4, "tiled", 4, True),
    ((64, 64, 256, 256), (3, 1, 0, 2), 4, "tiled", 4, True),
    ((64, 64, 256, 256), (2, 1, 0, 3), 4, "rows", 4, True),
    ((64, 64, 256, 256), (1, 0, 2, 3), 4, "rows", 4, True),
    ((33, 65), (1, 0), 4, "tiled", 4, False),
    ((64, 64), (1, 0), 16, "tiled", 1, True),
    ((64, 64), (1, 0), 8, "tiled", 2, True),
    ((64, 64), (1, 0), 1, "tiled", 4, True),
    ((5, 6, 7), (1, 0, 2), 4, "rows", 1, False),
    ((5, 6, 8), (1, 0, 2), 2, "rows", 8, True),
    ((5, 6, 8), (1, 0, 2), 1, "rows", 8, True),
]


@pytest.mark.parametrize("shape,perm,itemsize,kind,vector,fast", CHOICE, ids=str)
def test_path_choice(shape, perm, itemsize, kind, vector, fast):
    _, _, _, plan = transpose_plan(shape, perm, itemsize)
    assert (plan.kind, plan.vector, plan.fast) == (kind, vector, fast)
    assert plan.expression.startswith(f"tf::permute_{kind}<")


def test_tile_axes_are_source_and_destination_fastest():
    _, _, _, plan = transpose_plan((64, 64, 256, 256), (3, 1, 0, 2))
    j, k = plan.tile_axes
    assert k == len(plan.axes) - 1 and plan.dst_strides[k] == 1 and plan.src_strides[j] == 1


def test_strided_inner_view_is_a_row_gather_with_vector_stores():
    """x[:, ::2] of a 16384 x 32768 tensor: rows of stride-2 loads, 16-byte stores."""
    shape = (16384, 16384)
    src = sp.Operand((32768, 2), 0, 16384 * 32768, 16)
    dst = sp.Operand(compact_strides(shape), 0, 16384 * 16384, 16)
    plan = sp._plan(shape, src, dst, 4)
    assert (plan.kind, plan.vector, plan.fast) == ("rows", 4, False)
    assert plan.index == U32


def test_misaligned_buffer_disables_vectors():
    shape = (64, 64)
    dst = sp.Operand((64, 1), 0, 4096, 16)
    assert sp._plan(shape, sp.Operand((1, 64), 0, 4096, 4), dst, 4).fast is False
    assert sp._plan(shape, sp.Operand((1, 64), 0, 4096, 16), dst, 4).fast is True
    assert sp._plan(shape, sp.Operand((1, 64), 1, 4096, 16), dst, 4).fast is False


def test_broadcast_source_uses_rows():
    shape = (7, 9)
    src = sp.Operand((1, 0), 0, 7, 16)
    dst = sp.Operand((9, 1), 0, 63, 16)
    plan = check_plan(shape, src, dst, 4)
    assert plan.kind == "rows"


@pytest.mark.parametrize("base,index", [(2**32 - 2**20, U32), (2**32 - 2**20 + 1, U64)],
                         ids=str)
def test_index_type(base, index):
    small = sp.Operand((1,), 0, 8, 16)
    assert sp.index_type(sp.Operand((1,), 0, base, 16), small) == index
    assert sp.index_type(small, sp.Operand((1,), 0, base, 16)) == index


def test_canonical_form_coalesces_and_flips():
    n, s, so, d, do = sp.canonicalize((2, 3, 4), (12, 4, 1), 0, (-12, -4, -1), 23)
    assert n == (24,) and s == (-1,) and so == 23 and d == (1,) and do == 0


def test_huge_tile_count_falls_back():
    """More than 2^31 - 1 tiles: no tiled plan (the caller uses the generic copy)."""
    shape = (1 << 31, 2, 2)
    src = sp.Operand((4, 1, 2), 0, 1 << 33, 16)
    dst = sp.Operand((4, 2, 1), 0, 1 << 33, 16)
    assert sp._plan(shape, src, dst, 1) is None


# --- packing matches the C++ structs ------------------------------------------------------
def test_struct_sizes_match_header():
    header = (INCLUDE_DIR / "tenferro" / "permute.cuh").read_text()
    sizes = {(m[0], m[1]): int(m[2]) for m in re.findall(
        r"sizeof\((\w+)<(u32|u64)>\) == (\d+)", header)}
    for index, short in ((U32, "u32"), (U64, "u64")):
        assert sp.ROW_PLAN_SIZE[index] == sizes[("RowPlan", short)]
        assert sp.TILE_PLAN_SIZE[index] == sizes[("TilePlan", short)]
        assert sp.TRI_PLAN_SIZE[index] == sizes[("TriPlan", short)]


def test_row_vectors_are_at_most_16_bytes():
    for size, vs in ROW_VECTORS.items():
        assert vs[-1] == 1 and all(v * size <= 16 for v in vs)


def test_plans_are_cached():
    shape = (8, 8)
    src = sp.Operand((1, 8), 0, 64, 16)
    dst = sp.Operand((8, 1), 0, 64, 16)
    assert sp.plan_copy(shape, src, dst, 4) is sp.plan_copy(shape, src, dst, 4)


def test_tri_plan_packing():
    src = sp.Operand((60, 1, 12), 5, 1000, 16)
    raw = sp.plan_tri((3, 5, 4), src, -2, True, U32)
    f = struct.unpack("<18Iq2i", raw)
    assert f[0] == 3 and f[6] == 60 and f[12:18] == (5, 4, 1, 12, 5, 60)
    assert f[18:] == (-2, 1, 1)
