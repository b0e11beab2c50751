"""The indexing ops end to end on the CPU: the session methods run unchanged, their launches
execute on the kernel emulator (tests/reference/kernel_emulator.py) over a numpy heap, and
results are compared with the StableHLO reference. This covers validation order, plans,
argument images and the kernels' index math; the GPU tier runs the same tables on a
device."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tenferro_cuda import ALL_DTYPES, DType
from tenferro_cuda.configs.indexing import GatherConfig, PadConfig, ScatterConfig, SliceConfig
from tenferro_cuda.tensor import TensorView

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference import indexing_cases as cases  # noqa: E402
from reference import stablehlo as ref  # noqa: E402
from reference.emulated_session import EmuSession  # noqa: E402
from reference.indexing_tables import (  # noqa: E402
    COMBINERS,
    COMBOS,
    GATHER_TABLE,
    SCATTER_TABLE,
    sample,
)


@pytest.fixture
def es():
    return EmuSession()


def run_gather(es, operand, indices, cfg, pad=0, idx_pad=0):
    out = es.gather(es.upload(operand, pad), es.upload(indices, idx_pad), GatherConfig(**cfg))
    return es.download(out)


# --- gather -----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", cases.SPEC_GATHER, ids=lambda c: c["id"])
@pytest.mark.parametrize("pad", [0, 1], ids=["dense", "view"])
def test_gather_spec(es, case, pad):
    got = run_gather(es, case["operand"], case["indices"], case["cfg"], pad, pad)
    np.testing.assert_array_equal(got, case["expected"])


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.value)
@pytest.mark.parametrize("case_id,shape,indices,cfg,kernel", GATHER_TABLE,
                         ids=[c[0] for c in GATHER_TABLE])
@pytest.mark.parametrize("idt", [np.int32, np.int64], ids=["i32", "i64"])
def test_gather_dtypes_and_paths(es, dtype, case_id, shape, indices, cfg, kernel, idt):
    x = sample(dtype, shape, np.random.default_rng(1))
    idx = indices.astype(idt)
    got = run_gather(es, x, idx, cfg)
    want = ref.gather(x, idx, cases.ns(cfg, cases.GATHER_DEFAULTS))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert es.launches[-1].expression.startswith(f"tf::{kernel}<")


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(cases.gather_cases(), st.sampled_from([0, 1]), st.sampled_from([0, 2]))
def test_gather_random(case, pad, idx_pad):
    shape, indices, cfg = case
    s = EmuSession()
    x = np.arange(1, math.prod(shape) + 1, dtype=np.int32).reshape(shape)
    got = run_gather(s, x, indices, cfg, pad, idx_pad)
    np.testing.assert_array_equal(got, ref.gather(x, indices,
                                                  cases.ns(cfg, cases.GATHER_DEFAULTS)))


# --- scatter ----------------------------------------------------------------------------------
def run_scatter(es, operand, indices, updates, cfg, combiner, pad=0, **kw):
    out = es.scatter(es.upload(operand, pad), es.upload(indices, pad), es.upload(updates, pad),
                     ScatterConfig(**cfg, combiner=combiner, **kw))
    return es.download(out)


@pytest.mark.parametrize("case", cases.SPEC_SCATTER, ids=lambda c: c["id"])
@pytest.mark.parametrize("pad", [0, 1], ids=["dense", "view"])
def test_scatter_spec(es, case, pad):
    got = run_scatter(es, case["operand"], case["indices"], case["updates"], case["cfg"],
                      case["combiner"], pad)
    np.testing.assert_array_equal(got, case["expected"])


def test_scatter_overhanging_window_is_skipped(es):
    o = cases.OVERHANG
    got = run_scatter(es, o["operand"], o["indices"], o["updates"], o["cfg"], "add")
    np.testing.assert_array_equal(got, o["window"])


@pytest.mark.parametrize("combiner,dtype", COMBOS, ids=[f"{c}-{d.value}" for c, d in COMBOS])
@pytest.mark.parametrize("case_id,shape,indices,ushape,cfg,kernel", SCATTER_TABLE,
                         ids=[c[0] for c in SCATTER_TABLE])
def test_scatter_dtypes_and_paths(es, combiner, dtype, case_id, shape, indices, ushape, cfg,
                                  kernel):
    rng = np.random.default_rng(7)
    x, upd = sample(dtype, shape, rng), sample(dtype, ushape, rng)
    got = run_scatter(es, x, indices.astype(np.int64), upd, cfg, combiner)
    want = ref.scatter(x, indices, upd, cases.ns(cfg, cases.SCATTER_DEFAULTS), combiner)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    if combiner == "add" and kernel == "scatter_scalar":
        kernel = "scatter_add"
    assert es.launches[-1].expression.startswith(f"tf::{kernel}<")


@pytest.mark.parametrize("shift", [0, 1], ids=["aligned", "shifted"])
@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.FLOAT16, DType.COMPLEX128, DType.INT8],
                         ids=lambda d: d.value)
def test_scatter_add_vector_loads_and_tails(es, dtype, shift):
    n, size = 3 * 4096 + 37, 999  # whole tiles and a partial one
    rng = np.random.default_rng(11)
    x = sample(dtype, (size,), rng)
    upd = sample(dtype, (n + shift,), rng)
    idx = rng.integers(-5, size + 5, n + shift)
    ut, it = es.upload(upd), es.upload(idx)
    ut = TensorView(ut, (n,), (1,), shift)
    it = TensorView(it, (n, 1), (1, 1), shift)
    cfg = ScatterConfig(update_window_dims=(), inserted_window_dims=(0,),
                        scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    got = es.download(es.scatter(es.upload(x), it, ut, cfg))
    want = ref.scatter(x, idx[shift:, None], upd[shift:],
                       cases.ns(dict(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,), index_vector_dim=1),
                                cases.SCATTER_DEFAULTS), "add")
    if dtype.is_float or dtype.is_complex:  # the emulator adds in index order, as ref
        np.testing.assert_allclose(got, want, rtol=1e-2 if dtype is DType.FLOAT16 else 1e-6)
    else:
        np.testing.assert_array_equal(got, want)
    (launch,) = es.launches
    assert launch.expression == f"tf::scatter_add<{dtype.ctype}>"
    assert launch.args[-2:] == (0 if shift else 1, 0)  # vector loads; small: no evict_last


def test_large_scatter_add_keeps_lines_then_demotes(es):
    size, n = 1 << 20, 1 << 17  # 4 MiB result, 4 updates per 128-byte line
    idx = (np.arange(n, dtype=np.int64) * 8) % size
    upd = np.ones(n, np.float32)
    cfg = dict(update_window_dims=(), inserted_window_dims=(0,),
               scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    got = run_scatter(es, np.zeros(size, np.float32), idx[:, None], upd, cfg, "add")
    assert got.sum() == n and got[8] == 1
    add, demote = es.launches
    assert add.expression == "tf::scatter_add<float>" and add.args[-2:] == (1, 1)
    assert demote.expression == "tf::scatter_l2_normal"
    assert demote.args == (add.args[0], 4 * size)
    es.launches.clear()
    es.ctx.info.arch = 75
    run_scatter(es, np.zeros(size, np.float32), idx[:, None], upd, cfg, "add")
    assert [la.expression for la in es.launches] == ["tf::scatter_add<float>"]
    assert es.launches[0].args[-1] == 0


@pytest.mark.parametrize("combiner", ["max", "min"])
@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.FLOAT16, DType.BFLOAT16,
                                   DType.FLOAT64], ids=lambda d: d.value)
def test_scatter_max_min_nan_and_zeros(es, combiner, dtype):
    npd = dtype.numpy
    x = np.array([0.0, -0.0, 1.0, np.nan, 2.0], npd)
    upd = np.array([-0.0, 0.0, np.nan, 5.0, -1.0, 3.0], npd)
    idx = np.array([0, 1, 2, 3, 4, 4])
    cfg = dict(update_window_dims=(), inserted_window_dims=(0,),
               scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    got = run_scatter(es, x, idx, upd, cfg, combiner)
    want = ref.scatter(x, idx, upd, cases.ns(cfg, cases.SCATTER_DEFAULTS), combiner)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


def test_scatter_replace_unique_uses_one_store_pass(es):
    cfg = dict(update_window_dims=(), inserted_window_dims=(0,),
               scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    run_scatter(es, np.zeros(5, np.int32), np.array([4, 1]), np.array([7, 8], np.int32), cfg,
                "replace", unique_indices=True)
    assert [la.expression for la in es.launches] == ["tf::scatter_scalar<tf::u32, 3>"]


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(cases.scatter_cases(), st.sampled_from(sorted(COMBINERS)), st.sampled_from([0, 1]))
def test_scatter_random(case, combiner, pad):
    shape, indices, ushape, cfg = case
    s = EmuSession()
    x = np.arange(math.prod(shape), dtype=np.int32).reshape(shape)
    upd = (np.arange(math.prod(ushape), dtype=np.int32) * 7 % 23 - 11).reshape(ushape)
    got = run_scatter(s, x, indices, upd, cfg, combiner, pad)
    want = ref.scatter(x, indices, upd, cases.ns(cfg, cases.SCATTER_DEFAULTS), combiner)
    np.testing.assert_array_equal(got, want)


# --- slicing ----------------------------------------------------------------------------------
@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 5), max_size=4), st.data(), st.sampled_from([0, 1]))
def test_slice_reverse_concatenate_random(shape, data, pad):
    s = EmuSession()
    x = np.arange(math.prod(shape), dtype=np.float16).reshape(shape)
    t = s.upload(x, pad)
    starts = [data.draw(st.integers(0, n)) for n in shape]
    limits = [data.draw(st.integers(a, n)) for a, n in zip(starts, shape)]
    steps = [data.draw(st.integers(1, 3)) for _ in shape]
    got = s.download(s.slice(t, SliceConfig(starts, limits, steps)))
    np.testing.assert_array_equal(got, ref.slice_(x, starts, limits, steps))
    axes = data.draw(st.lists(st.integers(0, max(len(shape) - 1, 0)), unique=True,
                              max_size=len(shape)))
    np.testing.assert_array_equal(s.download(s.reverse(t, axes)), ref.reverse(x, axes))
    if shape:
        ax = data.draw(st.integers(0, len(shape) - 1))
        y = x * 3
        got = s.download(s.concatenate([t, s.upload(y), t], ax))
        np.testing.assert_array_equal(got, ref.concatenate([x, y, x], ax))


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 5), max_size=4), st.data(), st.sampled_from([0, 1]))
def test_dynamic_slices_and_pad_random(shape, data, pad):
    s = EmuSession()
    x = np.arange(1, math.prod(shape) + 1, dtype=np.float64).reshape(shape)
    t = s.upload(x, pad)
    starts = np.array([data.draw(st.integers(-3, n + 3)) for n in shape], np.int64)
    sizes = [data.draw(st.integers(0, n)) for n in shape]
    st_t = s.upload(starts.astype(np.int32), pad)
    got = s.download(s.dynamic_slice(t, st_t, sizes))
    np.testing.assert_array_equal(got, ref.dynamic_slice(x, starts, sizes))
    upd = -np.arange(math.prod(sizes), dtype=np.float64).reshape(sizes)
    got = s.download(s.dynamic_update_slice(t, s.upload(upd, pad), s.upload(starts)))
    np.testing.assert_array_equal(got, ref.dynamic_update_slice(x, upd, starts))
    low = [data.draw(st.integers(-2, 2)) for _ in shape]
    high = [data.draw(st.integers(-2, 2)) for _ in shape]
    inner = [data.draw(st.integers(0, 2)) for _ in shape]
    ext = [lo + hi + n + max(n - 1, 0) * it
           for n, lo, hi, it in zip(shape, low, high, inner)]
    if all(e >= 0 for e in ext):
        got = s.download(s.pad(t, PadConfig(low, high, inner), value=-0.5))
        np.testing.assert_array_equal(got, ref.pad(x, -0.5, low, high, inner))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.value)
def test_slicing_dtypes_long_rows(es, dtype):
    x = sample(dtype, (3, 700), np.random.default_rng(3))
    t = es.upload(x)
    got = es.download(es.slice(t, SliceConfig((0, 4), (3, 700))))
    np.testing.assert_array_equal(got.view(np.uint8), x[:, 4:].copy().view(np.uint8))
    got = es.download(es.reverse(t, (1,)))
    np.testing.assert_array_equal(got.view(np.uint8), x[:, ::-1].copy().view(np.uint8))
    value = True if dtype.is_bool else 3
    got = es.download(es.pad(t, PadConfig((1, -2), (0, 5), (0, 1)), value=value))
    want = ref.pad(x, np.asarray(value).astype(dtype.numpy), (1, -2), (0, 5), (0, 1))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    assert es.launches[-1].expression.startswith("tf::pad_rows<")


def test_dynamic_slice_rows_use_wide_units(es):
    x = np.arange(40 * 1024, dtype=np.float32).reshape(40, 1024)
    got = es.download(es.dynamic_slice(es.upload(x), es.upload(np.array([37, 5])), (4, 1024)))
    np.testing.assert_array_equal(got, x[36:40])
    assert es.launches[-1].expression == "tf::copy_rows<tf::b128>"


def test_bfloat16_scatter_add_rounds_like_numpy(es):
    x = np.array([1.0, 256.0], ml_dtypes.bfloat16)
    upd = np.array([1.0, 1.0, 1.0], ml_dtypes.bfloat16)
    cfg = dict(update_window_dims=(), inserted_window_dims=(0,),
               scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    got = run_scatter(es, x, np.array([1, 1, 0]), upd, cfg, "add")
    np.testing.assert_array_equal(got, ref.scatter(x, np.array([1, 1, 0]), upd,
                                                   cases.ns(cfg, cases.SCATTER_DEFAULTS)))
