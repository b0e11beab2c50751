"""The three-pass scalar gather (ops/indexing/partition.py, ptx/gather.cu path (d)): when the
plan takes it, its scratch and launch images, and end to end on the kernel emulator with a
small L2, so that small tables split into many chunks."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tenferro_cuda.configs.indexing import GatherConfig
from tenferro_cuda.ops.indexing.partition import ROWS, chunk_bytes, gather_partition
from tenferro_cuda.ops.indexing.plan import GatherArgs, compact
from tenferro_cuda.tensor import TensorView

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference.emulated_session import EmuSession  # noqa: E402

SMS = 132
L2 = 60 << 20
A = 1 << 20


def scalar(n, table, *, item=4, strides=None, optr=A, slice_sizes=None):
    """GatherArgs of x[i_0, ..., i_k-1] for n index vectors over every axis of ``table``."""
    k = len(table)
    ishape = (n, k) if k > 1 else (n,)
    sizes = slice_sizes or (1,) * k
    window = tuple(d for d in range(k) if sizes[d] != 1)
    return GatherArgs(item, (optr, table, strides or compact(table)),
                      (3 * A, ishape, compact(ishape)), True, 2 * A,
                      (n,) + tuple(sizes[d] for d in window),
                      tuple(range(1, 1 + len(window))), (0,), (0,), window, sizes,
                      tuple(range(k)), len(ishape) - 1 if k > 1 else 1, (), ())


@pytest.mark.parametrize("l2,want", [(60 << 20, 16 << 20), (50 << 20, 16 << 20),
                                     (40 << 20, 8 << 20), (3072, 1024), (48, 16), (47, 0)])
def test_chunk_is_a_power_of_two_below_a_third_of_l2(l2, want):
    assert chunk_bytes(l2) == want


def test_issue_geometry_takes_three_passes():
    p = gather_partition(scalar(1 << 26, (1 << 28,)), L2, SMS)
    assert p is not None
    assert (p.shift, p.chunks, p.blocks, p.base, p.table_ptr) == (22, 64, 1 << 14, 0, A)
    assert p.scratch_bytes == (1 << 27) + 4 * (65 * (1 << 14) + 1)
    split, chunks, place = p.launches(4 * A)
    assert [x.expression for x in (split, chunks, place)] == [
        "tf::gather_split<tf::u32>", "tf::gather_chunks<tf::u32>", "tf::gather_place<tf::u32>"]
    assert split.grid == place.grid == (1 << 14, 1, 1) and chunks.grid == (SMS * 8, 1, 1)
    pos, offs = 4 * A, 4 * A + (1 << 27)
    assert split.args[7:] == (pos, offs) and place.args == (2 * A, pos, 1 << 26)
    assert chunks.args[5:] == (offs, offs + 4 * 65 * (1 << 14))


@pytest.mark.parametrize("args,l2", [
    (scalar(1 << 21, (1 << 28,)), L2),  # fewer than one index per 64 bytes of table
    (scalar(1 << 26, (1 << 24,)), L2),  # 64 MiB: less than 2 x L2
    (scalar(1 << 26, (1 << 28,), item=2), L2),  # 2-byte elements
    (scalar(1 << 26, (1 << 28,), item=1), L2),
    (scalar(1 << 30, (1 << 33,)), L2),  # 2,048 chunks
    (scalar(1 << 32, (1 << 33,)), L2),  # 2^32 elements
    (scalar(1 << 26, (1 << 14, 1 << 14), slice_sizes=(1, 2)), L2),  # not one element
    (scalar(1 << 26, (1 << 28,)), 40),  # no chunk size
], ids=["sparse", "small-table", "item2", "item1", "chunks", "n", "window", "tiny-l2"])
def test_one_pass_otherwise(args, l2):
    assert gather_partition(args, l2, SMS) is None


@pytest.mark.parametrize("item,n,tn,shift,chunks", [
    (4, 1 << 24, 1 << 28, 22, 64), (8, 1 << 22, 1 << 25, 21, 16), (16, 1 << 22, 1 << 24, 20, 16)])
def test_unit_sizes(item, n, tn, shift, chunks):
    p = gather_partition(scalar(n, (tn,), item=item), L2, SMS)
    assert p is not None and (p.shift, p.chunks) == (shift, chunks)
    assert p.blocks == -(-n // ROWS[item]) and p.unit == {4: "tf::u32", 8: "tf::u64",
                                                          16: "tf::b128"}[item]


def test_negative_strides_shift_the_table_start():
    args = scalar(1 << 20, (1000, 2000), strides=(-2000, 1), optr=1 << 40)
    p = gather_partition(args, 3 << 20, SMS)
    assert p is not None and p.base == 999 * 2000
    assert p.table_ptr == (1 << 40) - 4 * 999 * 2000 and p.chunks == 8  # 8 MB / 1 MiB


# --- end to end on the emulator ----------------------------------------------------------------
@pytest.fixture
def es():
    return EmuSession(l2_cache_bytes=3072)  # 1 KiB chunks; tables of >= 6 KiB: three passes


def gather_all_axes(es, x, idx):
    k = x.ndim
    cfg = GatherConfig(offset_dims=(), collapsed_slice_dims=tuple(range(k)),
                       start_index_map=tuple(range(k)), index_vector_dim=1 if k > 1 else 1,
                       slice_sizes=(1,) * k)
    return es.gather(x, idx, cfg)


def expect(x, idx):
    idx = idx.reshape(len(idx), -1)
    return x[tuple(np.clip(idx[:, d], 0, x.shape[d] - 1) for d in range(x.ndim))]


def three_passes(es):
    names = [x.expression.split("<")[0] for x in es.launches]
    return names == ["tf::gather_split", "tf::gather_chunks", "tf::gather_place"]


@pytest.mark.parametrize("dtype,tn,n,idt", [
    (np.float32, 4000, 5000, np.int64), (np.int32, 4096, 8192, np.int32),
    (np.float64, 3000, 4500, np.int32), (np.complex64, 3000, 100, np.int64),
    (np.complex128, 1500, 2100, np.int64)])
def test_one_axis(es, dtype, tn, n, idt):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(tn) * 100).astype(dtype)
    idx = rng.integers(-40, tn + 40, n).astype(idt)
    got = es.download(gather_all_axes(es, es.upload(x), es.upload(idx)))
    np.testing.assert_array_equal(got, expect(x, idx))
    assert three_passes(es) == (n * 64 >= tn * x.itemsize)


def test_two_axes_and_strided_operands(es):
    rng = np.random.default_rng(6)
    x = rng.integers(-1000, 1000, (64, 80)).astype(np.int32)
    idx = np.stack([rng.integers(-3, 67, 4200), rng.integers(-3, 83, 4200)], axis=1)
    for view in (es.upload(x), es.upload(x, pad=1)):
        got = es.download(gather_all_axes(es, view, es.upload(idx)))
        np.testing.assert_array_equal(got, expect(x, idx))
        assert three_passes(es)
        es.launches.clear()
    t = es.upload(np.ascontiguousarray(x.T))  # a transposed view: strides (1, 64)
    view = TensorView(t, (64, 80), (1, 64), 0)
    np.testing.assert_array_equal(es.download(gather_all_axes(es, view, es.upload(idx))),
                                  expect(x, idx))
    assert three_passes(es)


def test_reversed_operand(es):
    x = np.arange(5000, dtype=np.float32) * 0.5
    base = es.upload(x[::-1].copy())
    view = TensorView(base, (5000,), (-1,), 4999)
    idx = np.random.default_rng(7).integers(-9, 5009, 6000)
    got = es.download(gather_all_axes(es, view, es.upload(idx)))
    np.testing.assert_array_equal(got, expect(x, idx))
    assert three_passes(es)


@pytest.mark.parametrize("fill", [0, 3999, -5, 10**9], ids=["first", "last", "neg", "huge"])
def test_every_index_in_one_chunk(es, fill):
    x = np.arange(4000, dtype=np.float32)
    idx = np.full(4500, fill, np.int64)
    got = es.download(gather_all_axes(es, es.upload(x), es.upload(idx)))
    np.testing.assert_array_equal(got, expect(x, idx))
    assert three_passes(es)
