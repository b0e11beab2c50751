"""The numpy reference (tests/reference/stablehlo.py) against the StableHLO specification's
worked examples, hand-worked cases and numpy's own idioms, so the GPU tier compares
against something trustworthy."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference import indexing_cases as cases  # noqa: E402
from reference import stablehlo as ref  # noqa: E402


@pytest.mark.parametrize("case", cases.SPEC_GATHER, ids=lambda c: c["id"])
def test_reference_gather_matches_spec(case):
    got = ref.gather(case["operand"], case["indices"],
                     cases.ns(case["cfg"], cases.GATHER_DEFAULTS))
    np.testing.assert_array_equal(got, case["expected"])


@pytest.mark.parametrize("oob", ["window", "element"])
@pytest.mark.parametrize("case", cases.SPEC_SCATTER, ids=lambda c: c["id"])
def test_reference_scatter_matches_spec(case, oob):
    got = ref.scatter(case["operand"], case["indices"], case["updates"],
                      cases.ns(case["cfg"], cases.SCATTER_DEFAULTS), case["combiner"], oob)
    np.testing.assert_array_equal(got, case["expected"])


@pytest.mark.parametrize("oob", ["window", "element"])
def test_reference_scatter_overhang(oob):
    o = cases.OVERHANG
    got = ref.scatter(o["operand"], o["indices"], o["updates"],
                      cases.ns(o["cfg"], cases.SCATTER_DEFAULTS), "add", oob)
    np.testing.assert_array_equal(got, o[oob])


@pytest.mark.parametrize("case", cases.SLICE_EXAMPLES, ids=lambda c: c["id"])
def test_reference_slice(case):
    got = ref.slice_(case["x"], case["starts"], case["limits"], case["strides"])
    np.testing.assert_array_equal(got, case["expected"])


def test_reference_dynamic_slices():
    d = cases.DYNAMIC_SLICE_EXAMPLE
    np.testing.assert_array_equal(ref.dynamic_slice(d["x"], d["starts"], d["sizes"]),
                                  d["expected"])
    u = cases.DYNAMIC_UPDATE_SLICE_EXAMPLE
    np.testing.assert_array_equal(ref.dynamic_update_slice(u["x"], u["update"], u["starts"]),
                                  u["expected"])


@pytest.mark.parametrize("case", cases.PAD_EXAMPLES, ids=lambda c: c["id"])
def test_reference_pad(case):
    got = ref.pad(case["x"], 0, case["low"], case["high"], case["interior"])
    np.testing.assert_array_equal(got, case["expected"])


def test_reference_reverse_and_concatenate():
    r = cases.REVERSE_EXAMPLE
    np.testing.assert_array_equal(ref.reverse(r["x"], r["dims"]), r["expected"])
    a, b = np.arange(4).reshape(2, 2), np.array([[5, 6]])
    np.testing.assert_array_equal(ref.concatenate([a, b], 0), [[0, 1], [2, 3], [5, 6]])


shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(shapes, st.data())
def test_reference_slice_is_numpy_slicing(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    starts, limits, strides = [], [], []
    for n in shape:
        s = data.draw(st.integers(0, n))
        starts.append(s)
        limits.append(data.draw(st.integers(s, n)))
        strides.append(data.draw(st.integers(1, 3)))
    want = x[tuple(slice(s, e, k) for s, e, k in zip(starts, limits, strides))]
    np.testing.assert_array_equal(ref.slice_(x, starts, limits, strides), want)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(shapes, st.data())
def test_reference_pad_is_numpy_pad(shape, data):
    x = np.arange(1, int(np.prod(shape)) + 1, dtype=np.int32).reshape(shape)
    low = [data.draw(st.integers(0, 2)) for _ in shape]
    high = [data.draw(st.integers(0, 2)) for _ in shape]
    want = np.pad(x, list(zip(low, high)), constant_values=-7) if shape else x
    np.testing.assert_array_equal(ref.pad(x, -7, low, high, [0] * len(shape)), want)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(shapes, st.data())
def test_reference_reverse_is_flip(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    dims = data.draw(st.lists(st.integers(0, max(len(shape) - 1, 0)), unique=True,
                              max_size=len(shape)))
    np.testing.assert_array_equal(ref.reverse(x, dims), np.flip(x, tuple(dims)))


def test_reference_gather_is_take():
    table = np.arange(20, dtype=np.float32).reshape(5, 4)
    idx = np.array([[4], [0], [9], [-2]], np.int64)
    cfg = cases.ns(dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                        index_vector_dim=1, slice_sizes=(1, 4)), cases.GATHER_DEFAULTS)
    np.testing.assert_array_equal(ref.gather(table, idx, cfg),
                                  np.take(table, np.clip(idx[:, 0], 0, 4), axis=0))


def test_reference_scatter_add_and_replace_are_numpy():
    base = np.zeros(6, np.int32)
    idx = np.array([1, 3, 1, 5, 1, 7, -1], np.int64)
    upd = np.array([1, 2, 3, 4, 5, 6, 7], np.int32)
    cfg = cases.ns(dict(update_window_dims=(), inserted_window_dims=(0,),
                        scatter_dims_to_operand_dims=(0,), index_vector_dim=1),
                   cases.SCATTER_DEFAULTS)
    ok = (idx >= 0) & (idx < 6)
    want = base.copy()
    np.add.at(want, idx[ok], upd[ok])
    np.testing.assert_array_equal(ref.scatter(base, idx, upd, cfg, "add"), want)
    last = base.copy()
    last[idx[ok]] = upd[ok]  # numpy keeps the last of repeated indices
    np.testing.assert_array_equal(ref.scatter(base, idx, upd, cfg, "replace"), last)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16],
                         ids=["f32", "f16", "bf16"])
def test_reference_max_min_rules(dtype):
    nan, z, nz = dtype(np.nan), dtype(0.0), dtype(-0.0)
    assert np.isnan(ref.combine_max(dtype(1), nan, dtype))
    assert np.isnan(ref.combine_min(nan, dtype(1), dtype))
    assert not np.signbit(ref.combine_max(nz, z, dtype))
    assert not np.signbit(ref.combine_max(z, nz, dtype))
    assert np.signbit(ref.combine_min(z, nz, dtype))
    assert np.signbit(ref.combine_min(nz, z, dtype))
    assert ref.combine_max(dtype(-3), dtype(2), dtype) == 2
    assert ref.combine_min(dtype(-3), dtype(2), dtype) == -3


def test_reference_integer_add_wraps():
    assert ref.combine_add(np.int8(120), np.int8(10), np.int8) == -126
    assert ref.combine_add(np.uint8(250), np.uint8(10), np.uint8) == 4
    assert ref.combine_add(np.int64(2**63 - 1), np.int64(1), np.int64) == -(2**63)
