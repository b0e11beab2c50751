"""The three-pass scalar gather (ptx/gather.cu path (d)) on the device: tables of 256 MiB to
1 GiB (more than 2 x L2) read densely, every unit size, one and two index components, int32
and int64 indices with clamping, strided and reversed operands, indices crowded into one
chunk, and that the call stays enqueue-only. The CPU tier tests the selection rules."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from gpu_util import down, up

from tenferro_cuda.configs.indexing import GatherConfig
from tenferro_cuda.debug import forbid_host_sync

# The module, not the function of the same name the indexing package exports.
gather_ops = importlib.import_module("tenferro_cuda.ops.indexing.gather")


@pytest.fixture
def plans(monkeypatch):
    """The partition plans (or None) of the gathers the test makes."""
    seen = []
    real = gather_ops.gather_partition

    def spy(*args):
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(gather_ops, "gather_partition", spy)
    return seen


def config(k):
    return GatherConfig(offset_dims=(), collapsed_slice_dims=tuple(range(k)),
                        start_index_map=tuple(range(k)), index_vector_dim=1,
                        slice_sizes=(1,) * k)


def expect(x, idx):
    idx = idx.reshape(len(idx), -1)
    return x[tuple(np.clip(idx[:, d], 0, x.shape[d] - 1) for d in range(x.ndim))]


def table(dtype, n):
    """Distinct values in every element (bit patterns for the float types)."""
    if dtype in (np.int32, np.float32):
        return np.arange(n, dtype=np.int32).view(dtype)
    if dtype == np.float64:
        return np.arange(n, dtype=np.int64).view(dtype)
    return np.arange(2 * n, dtype=np.int64).view(dtype)  # complex128: 16 bytes


@pytest.mark.parametrize("dtype,tn,n,idt", [
    (np.int32, 1 << 28, 1 << 26, np.int64),  # the benchmark's geometry (1 GiB table)
    (np.float32, 1 << 26, (1 << 22) + 37, np.int32),
    (np.float64, 1 << 25, (1 << 22) + 5, np.int64),
    (np.complex128, 1 << 24, (1 << 22) + 3, np.int64)],
    ids=["int32-1GiB", "float32", "float64", "complex128"])
def test_one_axis(s, plans, dtype, tn, n, idt):
    x = table(dtype, tn)
    idx = np.random.default_rng(3).integers(-100, tn + 100, n).astype(idt)
    got = down(s, s.gather(up(s, x), up(s, idx), config(1)))
    assert plans[-1] is not None
    np.testing.assert_array_equal(got.view(np.uint8), expect(x, idx).view(np.uint8))


def test_two_axes(s, plans):
    x = table(np.float32, 1 << 26).reshape(8192, 8192)
    rng = np.random.default_rng(4)
    idx = rng.integers(-5, 8200, ((1 << 22) + 11, 2)).astype(np.int32)
    got = down(s, s.gather(up(s, x), up(s, idx), config(2)))
    assert plans[-1] is not None
    np.testing.assert_array_equal(got.view(np.int32), expect(x, idx).view(np.int32))


def test_reversed_and_strided_operands(s, plans):
    x = table(np.int32, 1 << 27)
    t = up(s, x)
    idx = np.random.default_rng(5).integers(0, 1 << 26, 1 << 23)
    i = up(s, idx)
    got = down(s, s.gather(t[::-1], i, config(1)))
    assert plans[-1] is not None
    np.testing.assert_array_equal(got, x[::-1][idx])
    got = down(s, s.gather(t[1::2], i, config(1)))
    assert plans[-1] is not None
    np.testing.assert_array_equal(got, x[1::2][idx])


@pytest.mark.parametrize("fill", [7, (1 << 26) - 1, -3, 1 << 40], ids=["first", "last",
                                                                        "neg", "huge"])
def test_every_index_in_one_chunk(s, plans, fill):
    x = table(np.int32, 1 << 26)
    idx = np.full((1 << 22) + 1, fill, np.int64)
    got = down(s, s.gather(up(s, x), up(s, idx), config(1)))
    assert plans[-1] is not None
    np.testing.assert_array_equal(got, expect(x, idx))


def test_enqueue_only_and_operand_untouched(s, plans):
    x = table(np.int32, 1 << 26)
    t = up(s, x)
    idx = np.random.default_rng(6).integers(0, 1 << 26, 1 << 22)
    i = up(s, idx)
    s.gather(t, i, config(1))  # compile outside the guard
    s.synchronize()
    with forbid_host_sync():
        out = s.gather(t, i, config(1))
        again = s.gather(t, i, config(1))
    assert plans[-1] is not None
    np.testing.assert_array_equal(down(s, out), x[idx])
    np.testing.assert_array_equal(down(s, again), x[idx])
    np.testing.assert_array_equal(down(s, t), x)
