"""The plans of argmax/argmin, the cumulative ops and sort (shapes/reduction_arg.py,
reduction_scan.py, reduction_sort.py) at the real thresholds and device sizes, run by
numpy models of the kernels' partitions: every axis position is read exactly once by the
passes, split winners and carries reach the right outputs, the radix passes' digit
counts, scans and stable scatters give numpy's stable order, and the buffers the passes
read and write never collide. The sort key mapping of every ordered dtype (the float16
and bfloat16 exponent masks included, which the kernel emulation cannot run) is modelled
on their bits: sorting by it is numpy's order with NaNs last."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

from tenferro_cuda.dtypes import DType
from tenferro_cuda.kernels.families import sort as sort_family
from tenferro_cuda.shapes import reduction_arg as arg_plan
from tenferro_cuda.shapes import reduction_scan as scan_plan
from tenferro_cuda.shapes import reduction_sort as sort_plan
from tenferro_cuda.shapes.reduction_plan import GRID_CAP


def offsets(frag, linear) -> np.ndarray:
    linear = np.asarray(linear, np.int64).copy()
    out = np.full(linear.shape, frag.offset, np.int64)
    for n, st in zip(reversed(frag.shape), reversed(frag.strides)):
        out += (linear % n) * st
        linear //= n
    return out


def strided(rng, shape, order):
    """A view of ``shape`` in a buffer laid out in axis ``order`` (reversed where < 0)."""
    perm = [abs(a) - 1 for a in order]
    base = rng.integers(-50, 50, [shape[p] for p in perm]).astype(np.int64)
    v = base.transpose(np.argsort(perm))
    for a in order:
        if a < 0:
            v = np.flip(v, abs(a) - 1)
    return base, v


def view_geometry(base: np.ndarray, v: np.ndarray):
    item = base.itemsize
    off = (v.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // item
    return tuple(s // item for s in v.strides), off


# --- argmax ------------------------------------------------------------------------------
def run_arg(passes, flat: np.ndarray) -> np.ndarray:
    """The passes of arg_reduce over a flat buffer (numpy model of ptx/argreduce.cu)."""
    vals, idx = flat, None
    for p in passes:
        out_v, out_i = np.empty(p.nitems, flat.dtype), np.empty(p.nitems, np.int64)
        for w in range(p.nitems):
            c, o = divmod(w, p.nout)
            j = np.arange(c * p.chunk, min(p.n, (c + 1) * p.chunk))
            assert j.size, "an empty chunk"
            at = offsets(p.kept, [o])[0] + j * p.st
            v = vals[at]
            i = idx[at] if idx is not None else j
            win = int(np.argmax(np.isnan(v))) if np.isnan(v).any() else int(np.argmax(v))
            ties = np.flatnonzero((v == v[win]) | (np.isnan(v) & np.isnan(v[win])))
            win = ties[np.argmin(i[ties])]
            out_v[w], out_i[w] = v[win], i[win]
        vals, idx = out_v, out_i
    return idx


ARG_CASES = {  # (shape, layout order, axis, device blocks) -> passes
    "long_vector": ((300001,), (1,), 0, 1056, 2),
    "few_long_rows": ((3, 60000), (1, 2), 1, 1056, 2),
    "rows": ((500, 300), (1, 2), 1, 1056, 1),
    "cols_split": ((40000, 5), (1, 2), 0, 1056, 3),
    "cols": ((300, 700), (1, 2), 0, 132, 2),
    "transposed": ((200, 3000), (2, 1), 1, 264, 2),
    "negative": ((50, 9000), (-1, -2), 1, 1056, 1),
    "middle": ((4, 9000, 3), (1, 2, 3), 1, 1056, 3),
}


@pytest.mark.parametrize("case", list(ARG_CASES))
def test_arg_passes_find_the_first_maximum(case):
    shape, order, axis, blocks, npasses = ARG_CASES[case]
    base, v = strided(np.random.default_rng(1), shape, order)
    strides, off = view_geometry(base, v)
    base = base.astype(np.float64)
    base.reshape(-1)[::997] = np.nan
    kept, n, st = arg_plan.split_axis(shape, strides, off, axis)
    passes = arg_plan.plan_arg(kept, n, st, blocks)
    assert len(passes) == npasses
    for p in passes:
        assert p.group in (1, 2, 4, 8, 16, 32, 256) and 1 <= p.blocks <= GRID_CAP
        assert (p.nchunks - 1) * p.chunk < p.n <= p.nchunks * p.chunk
        assert p.index == "tf::u32"
    assert passes[-1].nchunks == 1 and all(p.dst_partial for p in passes[:-1])
    got = run_arg(passes, base.reshape(-1))
    want = np.argmax(gather(base, shape, strides, off), axis=axis)
    np.testing.assert_array_equal(got, want.reshape(-1))


def gather(base, shape, strides, off) -> np.ndarray:
    """The view (shape, element strides, offset) of ``base`` as a new array."""
    idx = np.full(shape, off, np.int64)
    for a, (n, st) in enumerate(zip(shape, strides)):
        sh = [1] * len(shape)
        sh[a] = n
        idx = idx + (np.arange(n) * st).reshape(sh)
    return base.reshape(-1)[idx]


def test_arg_index_type_widens_past_2_31():
    kept = arg_plan.Frag((), ())
    assert arg_plan.plan_arg(kept, (1 << 31) + 5, 1, 1056)[0].index == "tf::u64"
    assert arg_plan.plan_arg(kept, 1 << 30, 1, 1056)[0].index == "tf::u32"


# --- cumulative ops ------------------------------------------------------------------------
def run_scan(passes, levels, src: np.ndarray, out: np.ndarray) -> None:
    """The passes of ptx/scan.cu in int64 (exact: any grouping gives the same sums)."""
    bufs = {"in": src, "out": out} | {i: np.zeros(lv.size, np.int64)
                                      for i, lv in enumerate(levels)}
    seen: dict = {}
    for p in passes:
        r = p.rows
        for row in range(r.m):
            ib, ob = offsets(r.rin, [row])[0], offsets(r.rout, [row])[0]
            running = 0  # chain: the total of the row's tiles before this one
            for t in range(p.pieces):
                j = np.arange(t * p.chunk, min(r.n, (t + 1) * p.chunk))
                x = bufs[p.src][ib + j * r.st_in]
                if p.dst is None:  # a totalling pass
                    lv = levels[p.totals]
                    bufs[p.totals][row * lv.rs + t * lv.ts] = x.sum()
                    continue
                carry = running
                running += x.sum()
                if p.carry is not None and t > 0:
                    lv = levels[p.carry]
                    carry = bufs[p.carry][row * lv.rs + (t - 1) * lv.ts]
                at = ob + j * r.st_out
                if p.dst == "out":
                    seen.update(dict.fromkeys(at.tolist(), True))
                bufs[p.dst][at] = carry + np.cumsum(x)
    assert len(seen) == out.size, "an output element was not written"


SCAN_CASES = {  # (shape, layout order, axis, reverse) -> (kernels of the passes)
    "long_vector": ((3_000_001,), (1,), 0, False, ("rows", "rows", "rows")),
    "rows_tiles": ((5, 9000), (1, 2), 1, True, ("rows", "cols", "rows")),
    "one_tile_rows": ((300, 2048), (1, 2), 1, False, ("rows",)),
    "chained_rows": ((600, 5000), (1, 2), 1, True, ("rows",)),
    "short_rows": ((7000, 9), (1, 2), 1, False, ("cols",)),
    "cols_chunks": ((50000, 3), (1, 2), 0, True, ("cols",) * 5),
    "transposed": ((3000, 40), (2, 1), 0, False, ("rows", "cols", "rows")),
    "negative_middle": ((3, 5000, 4), (-1, 2, -3), 1, True, ("cols", "cols", "cols")),
}


@pytest.mark.parametrize("case", list(SCAN_CASES))
def test_scan_passes_give_the_cumulative_sums(case):
    shape, order, axis, reverse, kernels = SCAN_CASES[case]
    base, v = strided(np.random.default_rng(2), shape, order)
    strides, off = view_geometry(base, v)
    out = np.zeros(shape, np.int64)
    rows = scan_plan.rows_of(shape, strides, off, [s // 8 for s in out.strides], 0, axis,
                             reverse)
    passes, levels = scan_plan.plan_scan(rows)
    assert tuple(p.kernel for p in passes) == kernels
    assert passes[0].chain == (case == "chained_rows")
    for p in passes:
        assert p.index == "tf::u32" and p.grid[0] <= GRID_CAP and p.grid[1] <= 65535
        assert p.block[0] * p.block[1] <= 256
    run_scan(passes, levels, base.reshape(-1), out.reshape(-1))
    x = gather(base, shape, strides, off)
    want = np.flip(np.cumsum(np.flip(x, axis), axis), axis) if reverse else np.cumsum(x, axis)
    np.testing.assert_array_equal(out, want)


def test_scan_plans_depend_on_the_shape_alone():
    rows = scan_plan.rows_of((4, 100000), (100000, 1), 0, (100000, 1), 0, 1, False)
    assert scan_plan.plan_scan(rows) == scan_plan.plan_scan(rows)
    assert list(inspect.signature(scan_plan.plan_scan).parameters) == ["rows"]


# --- sort ----------------------------------------------------------------------------------
def sort_key(bits: np.ndarray, dtype: DType, descending: bool) -> np.ndarray:
    """The key of ptx/sort.cu's policy for ``dtype`` (from families/sort.policy), on bits."""
    pol = sort_family.policy(dtype)
    u = bits.dtype
    top = u.type(1 << (8 * u.itemsize - 1))
    if "Float" in pol:
        exponent = u.type(int(pol.split(", ")[1].removesuffix("ull>"), 16))
        nan = (bits & ~top) > exponent
        b = np.where(bits == top, u.type(0), bits)
        key = np.where(b & top, ~b, b | top)
        key = np.where(nan, ~u.type(0), np.where(descending, ~key, key))
        return key.astype(u)
    key = bits ^ top if "Signed" in pol else bits
    return (~key if descending else key).astype(u)


def numpy_order(x: np.ndarray, descending: bool) -> np.ndarray:
    """numpy's stable argsort, NaNs last in both directions."""
    if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16:
        with np.errstate(invalid="ignore"):  # bfloat16 NaN -> float64 warns
            w = x.astype(np.float64)
        nan = np.isnan(w)
        return np.lexsort((np.where(nan, 0.0, -w if descending else w), nan))
    if descending:
        return (x.size - 1 - np.argsort(x[::-1], kind="stable"))[::-1]
    return np.argsort(x, kind="stable")


def specials(dtype: DType, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = dtype.numpy
    if dtype.is_bool:
        return rng.random(n) < 0.5
    u = np.dtype(f"u{d.itemsize}")
    bits = rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True)  # NaN payloads too
    x = bits.view(d)
    if dtype.is_float:
        pool = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0], np.float64).astype(d)
        x = np.where(rng.random(n) < 0.3, rng.choice(pool, n), x)
    return x


@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
@pytest.mark.parametrize("dtype", list(sort_family.DTYPES), ids=lambda d: d.value)
def test_sort_keys_order_like_numpy(dtype, descending):
    x = specials(dtype, 20000, 3)
    bits = x.view(f"u{x.dtype.itemsize}")
    got = np.argsort(sort_key(bits, dtype, descending), kind="stable")
    np.testing.assert_array_equal(got, numpy_order(x, descending))


def run_radix(plan, keys: np.ndarray, key_of) -> np.ndarray:
    """The passes of radix_hist / scan / radix_scatter (numpy model): the positions."""
    m, n = plan.m, plan.n
    assert plan.bpr * plan.span >= n > (plan.bpr - 1) * plan.span and plan.span % plan.tile == 0
    cur, pos = keys.reshape(m, n), np.tile(np.arange(n), (m, 1))
    for p in range(plan.passes):
        digit = (key_of(cur) >> np.uint64(8 * p)).astype(np.int64) & 255
        counts = np.zeros((m, 256, plan.bpr), np.int64)
        for c in range(plan.bpr):
            part = digit[:, c * plan.span:(c + 1) * plan.span]
            for r in range(m):
                counts[r, :, c] = np.bincount(part[r], minlength=256)
        incl = np.cumsum(counts.reshape(m, -1), axis=1)  # the scan of counts_rows()
        start = np.concatenate([np.zeros((m, 1), np.int64), incl[:, :-1]], axis=1)
        nxt, npos = np.empty_like(cur), np.empty_like(pos)
        for r in range(m):
            for c in range(plan.bpr):
                j = np.arange(c * plan.span, min(n, (c + 1) * plan.span))
                d = digit[r, j]
                order = np.argsort(d, kind="stable")  # the scatter's ranks
                rank = np.empty(j.size, np.int64)
                rank[order] = np.arange(j.size)
                first = np.searchsorted(d[order], d)  # the block's first element of d
                dest = start[r].reshape(256, plan.bpr)[d, c] + rank - first
                nxt[r, dest], npos[r, dest] = cur[r, j], pos[r, j]
        assert (np.sort(npos, axis=1) == np.arange(n)).all(), "not a permutation"
        cur, pos = nxt, npos
    return pos


@pytest.mark.parametrize("m,n,itemsize,blocks", [(1, 100003, 4, 7), (3, 9000, 8, 396),
                                                 (5, 5000, 2, 2), (2, 70000, 1, 3)])
def test_radix_passes_sort_stably(m, n, itemsize, blocks):
    plan = sort_plan.plan_radix(m, n, itemsize, blocks)
    assert plan.passes == itemsize and plan.grid == m * plan.bpr
    dtype = {1: DType.INT8, 2: DType.FLOAT16, 4: DType.FLOAT32, 8: DType.INT64}[itemsize]
    x = specials(dtype, m * n, 4).reshape(m, n)
    bits = x.view(f"u{itemsize}")
    pos = run_radix(plan, bits, lambda b: sort_key(b, dtype, False).astype(np.uint64))
    for r in range(m):
        np.testing.assert_array_equal(pos[r], numpy_order(x[r], False))


@pytest.mark.parametrize("passes", range(1, 9))
def test_radix_buffers_never_collide(passes):
    plan = sort_plan.RadixPlan(2, 5000, passes, 4096, 4096, 2, 4)
    keys, positions = plan.key_buffers(), plan.index_buffers()
    assert keys[-1] == "out" and positions[-1] == "indices"
    reads_k, reads_i = ["input"] + keys[:-1], ["iota"] + positions[:-1]
    for p in range(passes):
        assert keys[p] != reads_k[p] and positions[p] != reads_i[p]
        # the int64 indices overlap "low": the pass writing them must not read it
        assert not (positions[p] == "indices" and reads_i[p] == "low")
    assert "scratch" in keys or passes == 1


def test_small_plan_packs_short_rows():
    p = sort_plan.plan_small((1000, 5), (5, 1), 0, (5, 1), 1)
    assert (p.logp, p.logt, p.m) == (3, 9, 1000) and p.grid == -(-1000 // 64)
    p = sort_plan.plan_small((3, 2048), (1, 3), 7, (2048, 1), 1)
    assert (p.logp, p.logt, p.st_in, p.rin.strides, p.rin.offset) == (11, 11, 3, (1,), 7)
