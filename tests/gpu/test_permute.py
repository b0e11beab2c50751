"""Permutation kernels against numpy: every permutation of two rank-4 shapes per element
size, random permutations up to rank 8, 2-D transposes of odd sizes, strided / negative /
misaligned views (the non-vector paths), copies into strided destinations, and the 64-bit
index path. One dtype per element size (1, 2, 4, 8 and 16 bytes): the kernels are
instantiated per size, so the size is what is being tested."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda.ops import storage

SIZES = {1: tc.bool_, 2: tc.bfloat16, 4: tc.float32, 8: tc.int64, 16: tc.complex128}
SIZE_IDS = [f"{k}B-{v.value}" for k, v in SIZES.items()]


def sample(dtype, shape, rng):
    if dtype == tc.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype.numpy)
    if dtype.is_integer:
        return rng.integers(-2**40, 2**40, shape).astype(dtype.numpy)
    return rng.standard_normal(shape).astype(dtype.numpy)


def same(got, ref):
    ref = np.asarray(ref).copy(order="C")
    assert got.shape == ref.shape
    assert got.tobytes() == ref.tobytes()


PERMS4 = list(itertools.permutations(range(4)))


@pytest.mark.parametrize("shape", [(3, 5, 7, 2), (17, 33, 65, 9)], ids=str)
@pytest.mark.parametrize("dtype", SIZES.values(), ids=SIZE_IDS)
def test_all_24_permutations(s, rng, dtype, shape):
    a = sample(dtype, shape, rng)
    t = up(s, a)
    outs = [s.transpose(t, p) for p in PERMS4]
    for p, out in zip(PERMS4, outs):
        assert out.shape == a.transpose(p).shape
        same(down(s, out), a.transpose(p))


@pytest.mark.parametrize("seed", range(24))
def test_random_permutations_up_to_rank_8(s, seed):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 9))
    shape = [int(rng.choice([1, 2, 3, 4, 5, 7, 8, 16, 33])) for _ in range(rank)]
    while math.prod(shape) > 200_000:
        shape[int(rng.integers(0, rank))] = 2
    dtype = list(SIZES.values())[seed % 5]
    a = sample(dtype, shape, rng)
    perm = tuple(int(p) for p in rng.permutation(rank))
    same(down(s, s.transpose(up(s, a), perm)), a.transpose(perm))


ODD_2D = [(1, 1), (1, 7), (7, 1), (31, 33), (63, 65), (64, 64), (127, 129), (1000, 3),
          (3, 1000), (257, 255)]


@pytest.mark.parametrize("shape", ODD_2D, ids=str)
@pytest.mark.parametrize("dtype", SIZES.values(), ids=SIZE_IDS)
def test_2d_transpose(s, rng, dtype, shape):
    a = sample(dtype, shape, rng)
    same(down(s, s.transpose(up(s, a), (1, 0))), a.T)


@pytest.mark.parametrize("dtype", SIZES.values(), ids=SIZE_IDS)
def test_large_aligned_transposes(s, rng, dtype):
    """Full vector tiles and vector rows: sizes that are multiples of every tile."""
    a = sample(dtype, (128, 96, 64), rng)
    t = up(s, a)
    for perm in [(2, 1, 0), (0, 2, 1), (1, 0, 2), (2, 0, 1)]:
        same(down(s, s.transpose(t, perm)), a.transpose(perm))


VIEWS = [
    ("every-other-column", lambda x: x[:, ::2]),
    ("negative-rows", lambda x: x[::-1]),
    ("negative-both", lambda x: x[::-3, ::-1]),
    ("transposed", lambda x: x.T),
    ("offset-by-one", lambda x: x[:, 1:]),
    ("offset-transposed", lambda x: x[1:, 1:].T),
    ("inner-stride-3", lambda x: x[2:, 1::3]),
]


@pytest.mark.parametrize("view", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("dtype", SIZES.values(), ids=SIZE_IDS)
def test_views(s, rng, dtype, view):
    a = sample(dtype, (70, 132), rng)
    v = view[1](up(s, a))
    ref = view[1](a)
    same(down(s, s.to_contiguous_read(v)), ref)
    same(down(s, s.transpose(v, (1, 0))), ref.T)


@pytest.mark.parametrize("dtype", SIZES.values(), ids=SIZE_IDS)
def test_copy_into_strided_and_reversed_destinations(s, rng, dtype):
    a = sample(dtype, (33, 40), rng)
    base = sample(dtype, (66, 81), rng)
    d = up(s, base)
    s.copy_read_into(up(s, a), d[::2, 80:0:-2])
    ref = base.copy()
    ref[::2, 80:0:-2] = a
    same(down(s, d), ref)
    d2 = up(s, base)
    s.copy_read_into(up(s, a), d2[1:41, 3:36].T)
    ref2 = base.copy()
    ref2[1:41, 3:36] = a.T
    same(down(s, d2), ref2)


@pytest.mark.parametrize("dtype", SIZES.values(), ids=SIZE_IDS)
def test_broadcast_large(s, rng, dtype):
    a = sample(dtype, (129, 1), rng)
    out = s.broadcast_in_dim(up(s, a), (3, 129, 257), (1, 2))
    same(down(s, out), np.broadcast_to(a, (3, 129, 257)))
    row = sample(dtype, (257,), rng)
    same(down(s, s.broadcast_in_dim(up(s, row), (129, 257), (1,))),
         np.broadcast_to(row, (129, 257)))


def test_permute_into_for_other_families(s, rng):
    a = sample(tc.float32, (4, 6, 5), rng)
    t = up(s, a)
    out = storage.permute_into(s._ctx, t[:, ::-1], (2, 0, 1), "dot_general")
    same(down(s, out), a[:, ::-1].transpose(2, 0, 1))
    with pytest.raises(tc.ValidationError) as info:
        storage.permute_into(s._ctx, t, (0, 0, 1), "dot_general")
    assert info.value.op == "dot_general"


def test_64_bit_index_path(s, rng):
    """A small view of a buffer of more than 2^32 elements indexes in 64 bits."""
    n = (1 << 32) + 4096
    big = s._ctx.alloc(tc.uint8, (n,), "test")
    a = rng.integers(0, 255, (96, 80), dtype=np.uint8)
    window = big.view((96, 80), (80, 1), n - 96 * 80)
    s.copy_read_into(up(s, a), window)
    same(down(s, s.transpose(window, (1, 0))), a.T)
    same(down(s, s.to_contiguous_read(big.view((48, 40), (160, 2), n - 96 * 80))),
         a[::2, ::2])
    strided = big.view((80, 96), (1, 80), n - 96 * 80)
    out = s._ctx.alloc(tc.uint8, (80, 96), "test")
    s.copy_read_into(strided, out)
    same(down(s, out), a.T)
    s.reclaim_buffer(big)
