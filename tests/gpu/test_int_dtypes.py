"""int16, uint16, uint32 and uint64 on the GPU, at the values where they differ from the
other integers: arithmetic wraps at the width (INT16_MIN, the unsigned maxima), unsigned
values with the top bit set are large numbers (not negative ones) in comparisons, max/min,
reductions, arg reductions, sorts and scatter combiners, and the unsigned semantics of
neg, abs and sign (docs/dtypes.md). The op x dtype tables of the other modules run these
dtypes on random and special values too; this module pins the edges, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda.configs.elementwise import CompareDir
from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.configs.indexing import GatherConfig, ScatterConfig
from tenferro_cuda.errors import ValidationError

NEW = [tc.int16, tc.uint16, tc.uint32, tc.uint64]
UNSIGNED = [tc.uint16, tc.uint32, tc.uint64]


def edges(dtype: tc.DType) -> np.ndarray:
    """0, 1, the extremes, the top bit alone and its neighbours (as values of ``dtype``)."""
    info = np.iinfo(dtype.numpy)
    top = int(info.max) // 2 + 1
    vals = {0, 1, 2, int(info.max), int(info.max) - 1, top, top - 1, top + 1, int(info.min),
            int(info.min) + 1}
    if dtype.is_signed_integer:
        vals |= {-1, -2}
    return np.array(sorted(vals), dtype.numpy)


def wrap(values, dtype: tc.DType) -> np.ndarray:
    """Python ints modulo 2**bits, as values of ``dtype``."""
    bits = 8 * dtype.itemsize
    out = [v % (1 << bits) for v in values]
    return np.array(out, f"u{dtype.itemsize}").view(dtype.numpy)


@pytest.mark.parametrize("dtype", NEW, ids=lambda d: d.value)
def test_add_sub_mul_neg_wrap_at_the_width(s, dtype):
    a = edges(dtype)
    b = a[::-1].copy()
    x, y = up(s, a), up(s, b)
    ia, ib = [int(v) for v in a], [int(v) for v in b]
    assert np.array_equal(down(s, s.add(x, y)), wrap([p + q for p, q in zip(ia, ib)], dtype))
    assert np.array_equal(down(s, s.sub(x, y)), wrap([p - q for p, q in zip(ia, ib)], dtype))
    assert np.array_equal(down(s, s.mul(x, y)), wrap([p * q for p, q in zip(ia, ib)], dtype))
    assert np.array_equal(down(s, s.neg(x)), wrap([-p for p in ia], dtype))


def test_int16_min_edges(s):
    m = up(s, np.array([-32768, -32768, -32768], np.int16))
    assert down(s, s.abs(m)).tolist() == [-32768] * 3  # wraps, as -INT16_MIN
    assert down(s, s.neg(m)).tolist() == [-32768] * 3
    minus_one = up(s, np.array([-1, 1, 2], np.int16))
    assert down(s, s.div(m, minus_one)).tolist() == [-32768, -32768, -16384]
    assert down(s, s.rem(m, minus_one)).tolist() == [0, 0, 0]
    assert down(s, s.sign(m)).tolist() == [-1, -1, -1]


@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda d: d.value)
def test_unsigned_neg_abs_sign(s, dtype):
    """neg wraps (-1 is the maximum), abs is the identity, sign is 0 or 1."""
    a = edges(dtype)
    x = up(s, a)
    assert np.array_equal(down(s, s.neg(x)), wrap([-int(v) for v in a], dtype))
    assert np.array_equal(down(s, s.abs(x)), a)
    assert np.array_equal(down(s, s.sign(x)), (a != 0).astype(dtype.numpy))


@pytest.mark.parametrize("dtype", UNSIGNED, ids=lambda d: d.value)
def test_unsigned_order(s, dtype):
    a, b = (g.reshape(-1) for g in np.meshgrid(edges(dtype), edges(dtype), indexing="ij"))
    x, y = up(s, a), up(s, b)
    assert np.array_equal(down(s, s.maximum(x, y)), np.maximum(a, b))
    assert np.array_equal(down(s, s.minimum(x, y)), np.minimum(a, b))
    assert np.array_equal(down(s, s.compare(x, y, CompareDir.LT)), a < b)
    assert np.array_equal(down(s, s.compare(x, y, CompareDir.GE)), a >= b)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    got = down(s, s.clamp(up(s, a[::-1].copy()), up(s, lo), up(s, hi)))
    assert np.array_equal(got, np.minimum(np.maximum(a[::-1], lo), hi))


@pytest.mark.parametrize("dtype", NEW, ids=lambda d: d.value)
def test_integer_pow_wraps(s, dtype):
    base = np.array([3, 2, 0, 1, 7, 5], dtype.numpy)
    exp = np.array([40, 8 * dtype.itemsize, 0, 1000, 5, 0], dtype.numpy)
    got = down(s, s.pow(up(s, base), up(s, exp)))
    bits = 8 * dtype.itemsize
    assert np.array_equal(got, wrap([pow(int(b), int(e), 1 << bits) for b, e in
                                     zip(base, exp)], dtype))


def test_int16_negative_exponent_is_a_deferred_error(s):
    out = s.pow(up(s, np.array([2, 2], np.int16)), up(s, np.array([3, -1], np.int16)))
    with pytest.raises(ValidationError) as info:
        s.synchronize()
    assert info.value.kind == "device_data" and "negative" in str(info.value)
    assert down(s, out).tolist() == [8, 0]


@pytest.mark.parametrize("dtype", NEW, ids=lambda d: d.value)
def test_reductions_over_the_full_range(s, rng, dtype):
    info = np.iinfo(dtype.numpy)
    wide = np.uint64 if dtype is tc.uint64 else np.int64
    a = rng.integers(info.min, info.max, (300, 257), dtype=wide, endpoint=True).astype(
        dtype.numpy)
    a[17, 5], a[200, 9] = info.max, info.min
    x = up(s, a)
    for axes in ((0,), (1,), (0, 1)):
        assert np.array_equal(down(s, s.reduce_max(x, axes)), a.max(axis=axes))
        assert np.array_equal(down(s, s.reduce_min(x, axes)), a.min(axis=axes))
        assert np.array_equal(down(s, s.reduce_sum(x, axes)), a.sum(axis=axes, dtype=a.dtype))
        assert np.array_equal(down(s, s.reduce_prod(x, axes)),
                              a.prod(axis=axes, dtype=a.dtype))
    for axis in (0, 1):
        assert np.array_equal(down(s, s.argmax(x, axis)), a.argmax(axis=axis))
        assert np.array_equal(down(s, s.argmin(x, axis)), a.argmin(axis=axis))
        assert np.array_equal(down(s, s.cummax(x, axis)), np.maximum.accumulate(a, axis=axis))


@pytest.mark.parametrize("n", [50, 5000], ids=["small", "radix"])
@pytest.mark.parametrize("dtype", NEW, ids=lambda d: d.value)
def test_sort_orders_the_top_bit_last(s, rng, dtype, n):
    pool = edges(dtype)
    a = rng.choice(pool, (3, n))
    for descending in (False, True):
        vals, idx = s.sort_with_indices(up(s, a), 1, descending)
        want_idx = np.argsort(-a.astype(object) if descending else a, axis=1, kind="stable")
        assert np.array_equal(down(s, idx), want_idx.astype(np.int64))
        assert np.array_equal(down(s, vals), np.take_along_axis(a, want_idx, axis=1))


@pytest.mark.parametrize("combiner", ["max", "min", "add"])
@pytest.mark.parametrize("dtype", NEW, ids=lambda d: d.value)
def test_scatter_combiners_at_the_edges(s, rng, dtype, combiner):
    """Unsigned max/min pick values with the top bit set as the largest; 16-bit adds (a CAS
    on the 32-bit word) wrap in their own half of the word."""
    pool = edges(dtype)
    x = rng.choice(pool, 64)
    idx = rng.integers(0, 64, (4096, 1)).astype(np.int32)
    upd = rng.choice(pool, 4096)
    cfg = ScatterConfig(update_window_dims=(), inserted_window_dims=(0,),
                        scatter_dims_to_operand_dims=(0,), index_vector_dim=1,
                        combiner=combiner)
    got = down(s, s.scatter(up(s, x), up(s, idx), up(s, upd), cfg))
    want = x.copy()
    with np.errstate(over="ignore"):
        {"add": np.add, "max": np.maximum, "min": np.minimum}[combiner].at(
            want, idx[:, 0], upd)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", NEW, ids=lambda d: d.value)
def test_moves_keep_every_bit(s, dtype):
    """Transfers, transpose, gather and the structural copies move the extremes exactly."""
    a = np.resize(edges(dtype), (6, 7))
    x = up(s, a)
    assert np.array_equal(down(s, x), a)
    assert np.array_equal(down(s, s.transpose(x, (1, 0))), a.T)
    assert np.array_equal(down(s, s.tril(x, 0)), np.tril(a))
    idx = up(s, np.array([[5], [0], [3]], np.int64))
    cfg = GatherConfig(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                       index_vector_dim=1, slice_sizes=(1, 7))
    assert np.array_equal(down(s, s.gather(x, idx, cfg)), a[[5, 0, 3]])


@pytest.mark.parametrize("dtype", NEW, ids=lambda d: d.value)
def test_fused_arithmetic_equals_unfused(s, dtype):
    P, Ins = ElementwiseFusionPlan, FusionInstruction
    plan = P(2, [Ins("mul", (0, 1)), Ins("add", (2, 0)), Ins("neg", (3,)),
                 Ins("maximum", (4, 1)), Ins("compare", (5, 0), direction=CompareDir.GT),
                 Ins("select", (6, 5, 1)), Ins("cast", (7,), to=tc.float64)], (5, 7, 8))
    a = np.resize(edges(dtype), 999)
    b = np.roll(a, 3)
    xs = [up(s, a), up(s, b)]
    fused = s.execute_elementwise_fusion(xs, plan)
    vals = list(xs)
    vals.append(s.mul(vals[0], vals[1]))
    vals.append(s.add(vals[2], vals[0]))
    vals.append(s.neg(vals[3]))
    vals.append(s.maximum(vals[4], vals[1]))
    vals.append(s.compare(vals[5], vals[0], CompareDir.GT))
    vals.append(s.select(vals[6], vals[5], vals[1]))
    vals.append(s.cast(vals[7], tc.float64))
    for f, o in zip(fused, plan.outputs):
        assert np.array_equal(down(s, f), down(s, vals[o]))


@pytest.mark.parametrize("dtype", NEW, ids=lambda d: d.value)
def test_kernel_session_scale_wraps(s, dtype):
    """scale_tensor_write multiplies in place, wrapping (16-bit products through 32 bits)."""
    a = edges(dtype)
    factor = int(np.iinfo(dtype.numpy).max)  # -1 modulo 2**N for the unsigned dtypes
    x = up(s, a)
    with s.kernels("test.int_dtypes") as ks:
        ks.scale_tensor_write(x, factor)
    assert np.array_equal(down(s, x), wrap([int(v) * factor for v in a], dtype))
