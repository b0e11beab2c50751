"""scatter on the device against the StableHLO reference: the spec's examples, the
path x combiner x dtype table, random configurations (hypothesis), duplicate indices for
every combiner at scale, out-of-bounds windows, determinism, and every error path."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenferro_cuda as tc
from tenferro_cuda.configs.indexing import ScatterConfig
from tenferro_cuda.debug import forbid_host_sync
from tenferro_cuda.tensor import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference import indexing_cases as cases  # noqa: E402
from reference import stablehlo as ref  # noqa: E402
from reference.indexing_tables import COMBINERS, COMBOS, SCATTER_TABLE, sample  # noqa: E402

FLAT = dict(update_window_dims=(), inserted_window_dims=(0,),
            scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
ROWS = dict(update_window_dims=(1,), inserted_window_dims=(0,),
            scatter_dims_to_operand_dims=(0,), index_vector_dim=1)


def dev(s, array, view=False):
    array = np.asarray(array)
    if not view or array.ndim == 0:
        return s.upload_host_tensor(array)
    big = np.zeros(tuple(2 * n + 1 for n in array.shape), array.dtype)
    key = tuple(slice(1, 1 + 2 * n, 2) for n in array.shape)
    big[key] = array
    return up(s, big)[key]


def scatter(s, operand, indices, updates, cfg, combiner="add", view=False, **kw):
    out = s.scatter(dev(s, operand, view), dev(s, indices, view), dev(s, updates, view),
                    ScatterConfig(**cfg, combiner=combiner, **kw))
    return down(s, out)


@pytest.mark.parametrize("view", [False, True], ids=["dense", "view"])
@pytest.mark.parametrize("case", cases.SPEC_SCATTER, ids=lambda c: c["id"])
def test_spec_examples(s, case, view):
    got = scatter(s, case["operand"], case["indices"], case["updates"], case["cfg"],
                  case["combiner"], view)
    np.testing.assert_array_equal(got, case["expected"])


def test_overhanging_window_is_skipped_whole(s):
    o = cases.OVERHANG
    got = scatter(s, o["operand"], o["indices"], o["updates"], o["cfg"])
    np.testing.assert_array_equal(got, o["window"])


@pytest.mark.parametrize("combiner,dtype", COMBOS, ids=[f"{c}-{d.value}" for c, d in COMBOS])
@pytest.mark.parametrize("case_id,shape,indices,ushape,cfg,kernel", SCATTER_TABLE,
                         ids=[c[0] for c in SCATTER_TABLE])
def test_paths_combiners_dtypes(s, case_id, shape, indices, ushape, cfg, kernel, combiner,
                                dtype):
    rng = np.random.default_rng(5)
    x, upd = sample(dtype, shape, rng), sample(dtype, ushape, rng)
    got = scatter(s, x, indices.astype(np.int32), upd, cfg, combiner)
    want = ref.scatter(x, indices, upd, cases.ns(cfg, cases.SCATTER_DEFAULTS), combiner)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(case=cases.scatter_cases(), combiner=st.sampled_from(sorted(COMBINERS)),
       view=st.booleans())
def test_random_configs(s, case, combiner, view):
    shape, indices, ushape, cfg = case
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    upd = (np.arange(int(np.prod(ushape)), dtype=np.int32) * 7 % 23 - 11).reshape(ushape)
    got = scatter(s, x, indices, upd, cfg, combiner, view)
    want = ref.scatter(x, indices, upd, cases.ns(cfg, cases.SCATTER_DEFAULTS), combiner)
    np.testing.assert_array_equal(got, want)


def _dups(rng, n, size, oob=True):
    lo, hi = (-3, size + 3) if oob else (0, size)
    return rng.integers(lo, hi, size=n)


INTS = [np.int32, np.int64, np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64]


@pytest.mark.parametrize("dtype", INTS, ids=[np.dtype(d).str[1:] for d in INTS])
@pytest.mark.parametrize("combiner", ["add", "max", "min"])
def test_integer_duplicates_are_exact(s, rng, dtype, combiner):
    x = rng.integers(0, 100, 1000).astype(dtype)
    idx = _dups(rng, 1 << 18, 1000)
    upd = rng.integers(0, 120, idx.size).astype(dtype)
    ok = (idx >= 0) & (idx < 1000)
    want = x.copy()
    {"add": np.add, "max": np.maximum, "min": np.minimum}[combiner].at(want, idx[ok], upd[ok])
    np.testing.assert_array_equal(scatter(s, x, idx, upd, FLAT, combiner), want)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
                                   np.complex64, np.complex128],
                         ids=["f16", "bf16", "f32", "f64", "c64", "c128"])
def test_float_add_duplicates_with_small_integers_are_exact(s, rng, dtype):
    idx = _dups(rng, 1 << 16, 1000)
    upd = rng.integers(-2, 3, idx.size).astype(dtype)
    if np.issubdtype(dtype, np.complexfloating):
        upd = (upd + 1j * rng.integers(-2, 3, idx.size)).astype(dtype)
    x = np.zeros(1000, dtype)
    ok = (idx >= 0) & (idx < 1000)
    want = np.zeros(1000, np.complex128 if np.iscomplexobj(upd) else np.float64)
    np.add.at(want, idx[ok], upd[ok].astype(want.dtype))
    got = scatter(s, x, idx, upd, FLAT)
    np.testing.assert_array_equal(got.astype(want.dtype), want)


def test_float32_add_duplicates_within_rounding(s, rng):
    idx = _dups(rng, 1 << 20, 4096)
    upd = rng.standard_normal(idx.size).astype(np.float32)
    ok = (idx >= 0) & (idx < 4096)
    want = np.zeros(4096)
    np.add.at(want, idx[ok], upd[ok].astype(np.float64))
    got = scatter(s, np.zeros(4096, np.float32), idx, upd, FLAT)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.complex128, np.bool_],
                         ids=["f32", "f16", "i64", "c128", "bool"])
def test_replace_duplicates_last_window_wins(s, rng, dtype):
    idx = _dups(rng, 1 << 18, 777)
    upd = sample(tc.DType.of(dtype), idx.shape, rng, -1000, 1000)
    x = sample(tc.DType.of(dtype), (777,), rng)
    ok = (idx >= 0) & (idx < 777)
    want = x.copy()
    last, at = np.unique(idx[ok][::-1], return_index=True)  # the last update per element
    want[last] = upd[ok][::-1][at]
    first = scatter(s, x, idx, upd, FLAT, "replace")
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(scatter(s, x, idx, upd, FLAT, "replace"), first)


def test_replace_rows_with_duplicates_matches_reference(s, rng):
    x = rng.standard_normal((50, 33)).astype(np.float32)
    idx = rng.integers(-1, 51, size=(3000, 1))
    upd = rng.standard_normal((3000, 33)).astype(np.float32)
    want = ref.scatter(x, idx, upd, cases.ns(ROWS, cases.SCATTER_DEFAULTS), "replace")
    np.testing.assert_array_equal(scatter(s, x, idx, upd, ROWS, "replace"), want)


def test_replace_unique_indices(s, rng):
    idx = rng.permutation(5000)[:3000]
    upd = rng.standard_normal(3000).astype(np.float32)
    x = np.zeros(5000, np.float32)
    want = x.copy()
    want[idx] = upd
    np.testing.assert_array_equal(scatter(s, x, idx, upd, FLAT, "replace",
                                          unique_indices=True), want)


@pytest.mark.parametrize("combiner", ["max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16],
                         ids=["f32", "f64", "f16", "bf16"])
def test_max_min_propagate_nan_and_order_zeros(s, dtype, combiner):
    x = np.array([0.0, -0.0, 1.0, np.nan, 2.0, 0.0], dtype)
    upd = np.array([-0.0, 0.0, np.nan, 5.0, -1.0, 3.0, -0.0, -0.0], dtype)
    idx = np.array([0, 1, 2, 3, 4, 4, 5, 5])
    got = scatter(s, x, idx, upd, FLAT, combiner)
    want = ref.scatter(x, idx, upd, cases.ns(FLAT, cases.SCATTER_DEFAULTS), combiner)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_embedding_gradient_rows(s, rng):
    idx = rng.integers(0, 1000, size=(50000, 1))
    upd = rng.standard_normal((50000, 64)).astype(np.float32)
    want = np.zeros((1000, 64))
    np.add.at(want, idx[:, 0], upd.astype(np.float64))
    got = scatter(s, np.zeros((1000, 64), np.float32), idx, upd, ROWS)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_operand_is_not_modified_and_enqueue_only(s, rng):
    x = rng.standard_normal(100).astype(np.float32)
    t, i, u = up(s, x), up(s, np.array([3, 3, 7])), up(s, np.ones(3, np.float32))
    for comb in COMBINERS:
        s.scatter(t, i, u, ScatterConfig(**FLAT, combiner=comb))  # compile first
    s.synchronize()
    with forbid_host_sync():
        outs = {c: s.scatter(t, i, u, ScatterConfig(**FLAT, combiner=c)) for c in COMBINERS}
    np.testing.assert_array_equal(down(s, t), x)
    want = x.copy()
    want[3] += 2
    want[7] += 1
    np.testing.assert_array_equal(down(s, outs["add"]), want)


def test_empty_updates_and_operand(s):
    got = scatter(s, np.arange(5, dtype=np.float32), np.zeros((0, 1), np.int64),
                  np.zeros((0,), np.float32), FLAT)
    np.testing.assert_array_equal(got, np.arange(5, dtype=np.float32))
    out = s.scatter(up(s, np.zeros((0, 3), np.float32)), up(s, np.zeros((2, 1), np.int64)),
                    up(s, np.zeros((2, 3), np.float32)), ScatterConfig(**ROWS))
    assert out.shape == (0, 3)


def _args(s, dtype=np.float32, idt=np.int64, combiner="add", ushape=(2,)):
    return (up(s, np.zeros(6, dtype)), up(s, np.zeros((2, 1), idt)),
            up(s, np.zeros(ushape, dtype)), ScatterConfig(**FLAT, combiner=combiner))


ERRORS = [
    ("host-operand", lambda s: (Tensor.from_numpy(np.zeros(6, np.float32)),) + _args(s)[1:],
     tc.RuntimeStateError),
    ("host-updates", lambda s: _args(s)[:2] + (Tensor.from_numpy(np.zeros(2, np.float32)),
                                               _args(s)[3]), tc.RuntimeStateError),
    ("float-indices", lambda s: _args(s, idt=np.float32), tc.UnsupportedDTypeError),
    ("bool-add", lambda s: _args(s, dtype=np.bool_), tc.UnsupportedDTypeError),
    ("bool-max", lambda s: _args(s, dtype=np.bool_, combiner="max"),
     tc.UnsupportedDTypeError),
    ("complex-min", lambda s: _args(s, dtype=np.complex64, combiner="min"),
     tc.UnsupportedDTypeError),
    ("dtype-mismatch", lambda s: _args(s)[:2] + (up(s, np.zeros(2, np.float64)),
                                                 _args(s)[3]), tc.ValidationError),
    ("updates-shape-C4", lambda s: _args(s, ushape=(3,)), tc.ValidationError),
    ("not-a-config", lambda s: _args(s)[:3] + (FLAT,), tc.ValidationError),
]


@pytest.mark.parametrize("make,exc", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_raise_before_allocating(s, make, exc):
    args = make(s)
    before = s.memory_stats()["allocations"]
    with pytest.raises(exc) as info:
        s.scatter(*args)
    assert info.value.op == "scatter"
    assert s.memory_stats()["allocations"] == before


@pytest.mark.parametrize("shift", [0, 1], ids=["aligned", "shifted"])
@pytest.mark.parametrize("idt", [np.int32, np.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("dtype", [d for d in tc.ALL_DTYPES if d.is_numeric],
                         ids=lambda d: d.value)
def test_add_vector_loads_tails_and_l2_policy(s, dtype, idt, shift):
    """scatter_add: 4 MiB results with 2^17 + 37 updates take the evict_last path (and the
    demotion pass); shifted views take scalar loads; small integer values sum exactly in
    every dtype, so any order gives the reference."""
    size, n = (4 << 20) // dtype.itemsize, (1 << 17) + 37
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, size).astype(dtype.numpy)
    upd = rng.integers(-2, 3, n + shift).astype(dtype.numpy)
    idx = rng.integers(-3, size + 3, (n + shift, 1)).astype(idt)
    out = s.scatter(up(s, x), up(s, idx)[shift:], up(s, upd)[shift:],
                    ScatterConfig(**FLAT, combiner="add"))
    k, u = idx[shift:, 0], upd[shift:]
    keep = (k >= 0) & (k < size)  # ref.scatter for FLAT, vectorised (it loops per update)
    want = x.copy()
    np.add.at(want, k[keep], u[keep])
    np.testing.assert_array_equal(down(s, out), want)
