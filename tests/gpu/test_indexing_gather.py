"""gather on the device against the StableHLO reference: the spec's examples, the
path x dtype x index-dtype table, random configurations over ranks 0-5 (hypothesis),
large inputs for every kernel path, strided views, and every error path."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from gpu_util import down, up
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenferro_cuda as tc
from tenferro_cuda.configs.indexing import GatherConfig
from tenferro_cuda.debug import forbid_host_sync
from tenferro_cuda.tensor import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference import indexing_cases as cases  # noqa: E402
from reference import stablehlo as ref  # noqa: E402
from reference.indexing_tables import GATHER_TABLE, sample  # noqa: E402

EMB = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
           index_vector_dim=1, slice_sizes=(1, 8))


def dev(s, array, view=False):
    """A device tensor of ``array``, or a strided view (every other element) of one."""
    array = np.asarray(array)
    if not view or array.ndim == 0:
        return s.upload_host_tensor(array)
    big = np.zeros(tuple(2 * n + 1 for n in array.shape), array.dtype)
    key = tuple(slice(1, 1 + 2 * n, 2) for n in array.shape)
    big[key] = array
    return up(s, big)[key]


def gather(s, operand, indices, cfg, view=False):
    out = s.gather(dev(s, operand, view), dev(s, indices, view), GatherConfig(**cfg))
    return down(s, out)


@pytest.mark.parametrize("view", [False, True], ids=["dense", "view"])
@pytest.mark.parametrize("case", cases.SPEC_GATHER, ids=lambda c: c["id"])
def test_spec_examples(s, case, view):
    got = gather(s, case["operand"], case["indices"], case["cfg"], view)
    np.testing.assert_array_equal(got, case["expected"])


@pytest.mark.parametrize("idt", [np.int32, np.int64], ids=["i32", "i64"])
@pytest.mark.parametrize("dtype", tc.ALL_DTYPES, ids=lambda d: d.value)
@pytest.mark.parametrize("case_id,shape,indices,cfg,kernel", GATHER_TABLE,
                         ids=[c[0] for c in GATHER_TABLE])
def test_paths_and_dtypes(s, case_id, shape, indices, cfg, kernel, dtype, idt):
    x = sample(dtype, shape, np.random.default_rng(11))
    idx = indices.astype(idt)
    got = gather(s, x, idx, cfg)
    want = ref.gather(x, idx, cases.ns(cfg, cases.GATHER_DEFAULTS))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(case=cases.gather_cases(), view=st.booleans())
def test_random_configs(s, case, view):
    shape, indices, cfg = case
    x = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)
    got = gather(s, x, indices, cfg, view)
    np.testing.assert_array_equal(got, ref.gather(x, indices,
                                                  cases.ns(cfg, cases.GATHER_DEFAULTS)))


def test_large_scalar_gather_clamps(s, rng):
    table = rng.standard_normal(1 << 22).astype(np.float32)
    idx = rng.integers(-100, (1 << 22) + 100, size=(1 << 20, 1))
    cfg = dict(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,),
               index_vector_dim=1, slice_sizes=(1,))
    got = gather(s, table, idx, cfg)
    np.testing.assert_array_equal(got, table[np.clip(idx[:, 0], 0, (1 << 22) - 1)])


@pytest.mark.parametrize("width", [1, 3, 4, 40, 256, 1000], ids=lambda w: f"w{w}")
@pytest.mark.parametrize("dtype", [tc.float32, tc.float16, tc.complex128],
                         ids=lambda d: d.value)
def test_row_gather_widths(s, rng, width, dtype):
    table = sample(dtype, (3000, width), rng)
    idx = rng.integers(-5, 3005, size=4000).astype(np.int64)
    cfg = {**EMB, "slice_sizes": (1, width)}
    got = gather(s, table, idx, cfg)
    np.testing.assert_array_equal(got, table[np.clip(idx, 0, 2999)])


def test_row_gather_from_a_column_slice(s, rng):
    base = rng.standard_normal((500, 300)).astype(np.float32)
    t = up(s, base)[:, 4:260]  # rows start 16 bytes in: 16-byte units still apply
    idx = rng.integers(0, 500, size=4000)
    out = s.gather(t, up(s, idx), GatherConfig(**{**EMB, "slice_sizes": (1, 256)}))
    np.testing.assert_array_equal(down(s, out), base[idx, 4:260])


def test_general_gather_large(s, rng):
    x = rng.standard_normal((64, 1 << 14)).astype(np.float32)
    idx = rng.integers(-3, 70, size=(100,))
    cfg = {**EMB, "offset_dims": (0,), "slice_sizes": (1, 1 << 14)}
    got = gather(s, x, idx, cfg)
    np.testing.assert_array_equal(got, x[np.clip(idx, 0, 63)].T)


def test_batching_gather_large(s, rng):
    x = rng.standard_normal((16, 512, 64)).astype(np.float32)
    idx = rng.integers(0, 512, size=(16, 300, 1))
    cfg = dict(offset_dims=(2,), collapsed_slice_dims=(1,), operand_batching_dims=(0,),
               start_indices_batching_dims=(0,), start_index_map=(1,), index_vector_dim=2,
               slice_sizes=(1, 1, 64))
    got = gather(s, x, idx, cfg)
    np.testing.assert_array_equal(got, x[np.arange(16)[:, None], idx[..., 0]])


def test_gather_is_enqueue_only_and_leaves_inputs(s, rng):
    x = rng.standard_normal((100, 8)).astype(np.float32)
    t, i = up(s, x), up(s, np.array([5, 1, 99]))
    s.gather(t, i, GatherConfig(**EMB))  # compile outside the guard
    s.synchronize()
    with forbid_host_sync():
        out = s.gather(t, i, GatherConfig(**EMB))
    np.testing.assert_array_equal(down(s, out), x[[5, 1, 99]])
    np.testing.assert_array_equal(down(s, t), x)


def test_empty_results(s):
    out = s.gather(up(s, np.ones((4, 8), np.float32)), up(s, np.zeros((0, 1), np.int64)),
                   GatherConfig(**EMB))
    assert out.shape == (0, 8) and down(s, out).shape == (0, 8)
    out = s.gather(up(s, np.ones((0, 8), np.float32)), up(s, np.zeros((0,), np.int32)),
                   GatherConfig(**{**EMB, "slice_sizes": (0, 8)}))
    assert out.shape == (0, 8)


ERRORS = [
    ("host-operand", lambda s: (Tensor.from_numpy(np.ones((4, 8), np.float32)),
                                up(s, np.zeros(2, np.int64)), GatherConfig(**EMB)),
     tc.RuntimeStateError),
    ("host-indices", lambda s: (up(s, np.ones((4, 8), np.float32)),
                                Tensor.from_numpy(np.zeros(2, np.int64)), GatherConfig(**EMB)),
     tc.RuntimeStateError),
    ("numpy-operand", lambda s: (np.ones((4, 8), np.float32), up(s, np.zeros(2, np.int64)),
                                 GatherConfig(**EMB)), tc.RuntimeStateError),
    ("list-operand", lambda s: ([[1.0, 2.0]], up(s, np.zeros(2, np.int64)),
                                GatherConfig(**EMB)), tc.ValidationError),
    ("float-indices", lambda s: (up(s, np.ones((4, 8), np.float32)),
                                 up(s, np.zeros(2, np.float32)), GatherConfig(**EMB)),
     tc.UnsupportedDTypeError),
    ("uint8-indices", lambda s: (up(s, np.ones((4, 8), np.float32)),
                                 up(s, np.zeros(2, np.uint8)), GatherConfig(**EMB)),
     tc.UnsupportedDTypeError),
    ("not-a-config", lambda s: (up(s, np.ones((4, 8), np.float32)),
                                up(s, np.zeros(2, np.int64)), EMB), tc.ValidationError),
    ("rank-C1", lambda s: (up(s, np.ones((4, 8, 1), np.float32)),
                           up(s, np.zeros(2, np.int64)), GatherConfig(**EMB)),
     tc.ValidationError),
    ("slice-too-big-C21", lambda s: (up(s, np.ones((4, 5), np.float32)),
                                     up(s, np.zeros(2, np.int64)), GatherConfig(**EMB)),
     tc.ValidationError),
    ("vector-size-C3", lambda s: (up(s, np.ones((4, 8), np.float32)),
                                  up(s, np.zeros((2, 2), np.int64)), GatherConfig(**EMB)),
     tc.ValidationError),
]


@pytest.mark.parametrize("make,exc", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_raise_before_allocating(s, make, exc):
    args = make(s)
    before = s.memory_stats()["allocations"]
    with pytest.raises(exc) as info:
        s.gather(*args)
    assert info.value.op == "gather"
    assert s.memory_stats()["allocations"] == before
    got = gather(s, np.arange(16, dtype=np.float32).reshape(2, 8), np.array([1]), EMB)
    np.testing.assert_array_equal(got, [np.arange(8, 16)])  # the session still works
