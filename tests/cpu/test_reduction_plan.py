"""The reduction planner (shapes/reduction_plan.py): layout classification, the passes it
plans for the benchmark shapes, launch limits and index types, and a numpy emulation of
the planned passes (the kernels' index arithmetic, not their code) over random views:
every output written once, every reduced element read once, every 16-byte load aligned."""

from __future__ import annotations

import numpy as np
import pytest

from tenferro_cuda.shapes import reduction_plan as rp
from tenferro_cuda.shapes.reduction_plan import ColPass, Machine, RowPass, classify, plan_reduce

H200 = Machine(1056, 1056)

CLASSIFY = {  # (shape, strides, offset, axes) -> (path, kept shape, reduced shape, strides)
    "rows": ((4, 5), (5, 1), 0, (1,), "rows", (4,), (5,), (1,)),
    "cols": ((4, 5), (5, 1), 0, (0,), "cols", (5,), (4,), (5,)),
    "transposed_rows": ((5, 4), (1, 5), 0, (0,), "rows", (4,), (5,), (1,)),
    "transposed_cols": ((5, 4), (1, 5), 0, (1,), "cols", (5,), (4,), (5,)),
    "outer_and_inner": ((2, 3, 4), (12, 4, 1), 0, (0, 2), "rows", (3,), (2, 4), (12, 1)),
    "middle": ((2, 3, 4), (12, 4, 1), 0, (1,), "cols", (2, 4), (3,), (4,)),
    "all_coalesce": ((2, 3, 4), (12, 4, 1), 0, (0, 1, 2), "rows", (), (24,), (1,)),
    "negative_all": ((4, 5), (-5, -1), 19, (0, 1), "rows", (), (20,), (1,)),
    "broadcast_reduced": ((3, 4), (0, 1), 0, (0,), "cols", (4,), (3,), (0,)),
    "no_unit_rows": ((4, 5), (10, 2), 0, (1,), "rows", (4,), (5,), (2,)),
    "no_unit_cols": ((4, 5), (10, 2), 0, (0,), "cols", (5,), (4,), (10,)),
    "extent1": ((1, 5, 1), (5, 1, 1), 0, (0, 2), "rows", (5,), (), ()),
}


@pytest.mark.parametrize("case", list(CLASSIFY))
def test_classify(case):
    shape, strides, offset, axes, path, kshape, rshape, rstrides = CLASSIFY[case]
    prob = classify(shape, strides, offset, axes)
    assert prob.kept.shape == kshape
    assert (prob.red.shape, prob.red.strides) == (rshape, rstrides)
    if rshape:
        assert prob.path == path
    else:
        assert plan_reduce(prob, 4, 4, H200).kind == "copy"


def test_negative_strides_move_the_offset():
    prob = classify((4, 5), (-5, 1), 15, (0,))
    assert prob.kept.offset == 0 and prob.red.strides == (5,)


def _waves(p, m: Machine) -> float:
    blocks = p.blocks if isinstance(p, RowPass) else p.grid[0] * p.grid[1]
    return blocks / (m.row_blocks if isinstance(p, RowPass) else m.col_blocks)


@pytest.mark.parametrize("m", [H200, Machine(792, 792)], ids=["8_per_sm", "6_per_sm"])
def test_benchmark_plans(m):
    all_axes = plan_reduce(classify((1 << 28,), (1,), 0, (0,)), 4, 4, m)
    first, second = all_axes.passes
    assert all_axes.kind == "rows" and first.group == 256 and first.dst_partial
    assert first.nchunks == m.row_blocks and _waves(first, m) == 1
    assert second.src_partial and second.total == first.nchunks and not second.dst_partial
    rows = plan_reduce(classify((16384, 16384), (16384, 1), 0, (1,)), 4, 4, m)
    (only,) = rows.passes
    assert only.group == 32 and only.nout == 16384 and not only.flat
    cols = plan_reduce(classify((16384, 16384), (16384, 1), 0, (0,)), 4, 4, m)
    first, second = cols.passes
    assert cols.kind == "cols" and first.vec and second.vec
    assert first.nitems == 4096 and 0.9 < _waves(first, m) <= 1
    assert second.total == first.nchunks and not second.dst_partial


def test_index_types():
    big = plan_reduce(classify((1 << 31,), (1,), 0, (0,)), 1, 1, H200)
    assert [p.index for p in big.passes] == ["tf::u64", "tf::u32"]
    small = plan_reduce(classify(((1 << 31) - 1,), (1,), 0, (0,)), 1, 1, H200)
    assert small.passes[0].index == "tf::u32"
    cols = plan_reduce(classify((1 << 16, 1 << 16), (1 << 16, 1), 0, (0,)), 4, 4, H200)
    assert [p.index for p in cols.passes] == ["tf::u64", "tf::u32"]


# --- numpy emulation of planned passes --------------------------------------------------
def _offsets(frag, idx):
    if not frag.shape:
        return np.full(np.shape(idx), frag.offset, np.int64)
    coords = np.unravel_index(idx, frag.shape)
    return frag.offset + sum(np.asarray(c, np.int64) * s for c, s in zip(coords, frag.strides))


def _run_row(p: RowPass, src: np.ndarray) -> np.ndarray:
    assert p.group in (1, 2, 4, 8, 16, 32, 256) and (p.nchunks - 1) * p.chunk < p.total
    dst = np.zeros(p.nitems, np.int64)
    for w in range(p.nitems):
        o, s = divmod(w, p.nchunks)
        j = np.arange(s * p.chunk, min(p.total, (s + 1) * p.chunk))
        offs = _offsets(p.kept, o) + _offsets(p.outer, j // p.run) + j % p.run * p.run_stride
        assert offs.min() >= 0 and offs.max() < src.size
        dst[w] = src[offs].sum()
    return dst


def _run_col(p: ColPass, src: np.ndarray, out_size: int, itemsize: int) -> np.ndarray:
    v = 16 // itemsize if p.vec else 1
    bx, by = p.block
    assert bx * by <= 256 and p.grid[1] <= 65535 and p.grid[1] * by >= p.nchunks
    assert p.nitems == p.oin.size * (p.ncols // v) and (p.ncols % v == 0)
    dst = np.zeros(p.nchunks * p.plane if p.dst_partial else out_size, np.int64)
    hits = np.zeros(dst.size, np.int64)
    for s in range(p.nchunks):
        r = np.arange(s * p.chunk, min(p.total, (s + 1) * p.chunk))
        assert r.size
        roff = _offsets(p.outer, r // p.run) + r % p.run * p.rs
        for x in range(p.nitems):
            o, k = divmod(x, p.ncols // v)
            ib = _offsets(p.oin, o)
            ob = _offsets(rp.Frag(p.oin.shape, p.oout), o)
            first = ib + roff + k * v * p.col_in
            assert v == 1 or (first % v == 0).all()  # 16-byte aligned vector loads
            for j in range(v):
                offs = first + j * p.col_in
                assert offs.min() >= 0 and offs.max() < src.size
                at = s * p.plane + ob + (k * v + j) * p.col_out
                dst[at] += src[offs].sum()
                hits[at] += 1
    assert (hits == 1).all()
    return dst


def _random_view(rng):
    """A random strided view of arange (its values are the flat indices) and axes."""
    rank = int(rng.integers(0, 7))
    shape = tuple(int(n) for n in rng.choice([1, 2, 3, 4, 6, 8], rank))
    a = np.arange(int(np.prod(shape)) + 7)[7:].reshape(shape).transpose(rng.permutation(rank))
    for ax in range(rank):
        a = a[(slice(None),) * ax + (slice(None, None, int(rng.choice([1, 1, 2, -1, -2]))),)]
    axes = tuple(int(i) for i in np.flatnonzero(rng.random(rank) < 0.6))
    return a, axes


@pytest.mark.parametrize("lowered", [False, True], ids=["device", "lowered"])
@pytest.mark.parametrize("seed", range(60))
def test_emulated_plans(seed, lowered, monkeypatch):
    if lowered:  # tiny thresholds: block groups, splits and multi-level partials
        for name, value in [("MIN_CHUNK", 4), ("BLOCK_GROUP_MIN", 4), ("MIN_ROWS", 2)]:
            monkeypatch.setattr(rp, name, value)
    rng = np.random.default_rng(seed)
    a, axes = _random_view(rng)
    item = int(rng.choice([1, 2, 4, 4, 8, 16]))
    data = rng.integers(-50, 50, int(a.max()) + 1)
    prob = classify(a.shape, [st // a.itemsize for st in a.strides], int(a[(0,) * a.ndim]),
                    axes)
    plan = plan_reduce(prob, item, 4, Machine(16, 2) if lowered else H200)
    if plan.kind == "copy":
        assert all(a.shape[i] == 1 for i in axes)
        return
    ref = data[a].sum(axis=axes).reshape(-1)
    ones = np.ones_like(data)
    for values, want in ((data, ref), (ones, ones[a].sum(axis=axes).reshape(-1))):
        src, size = values, item
        for p in plan.passes:
            src = _run_row(p, src) if isinstance(p, RowPass) else \
                _run_col(p, src, want.size, size)
            size = 4
        np.testing.assert_array_equal(src, want)
