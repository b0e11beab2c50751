"""slice, dynamic_slice, dynamic_update_slice, pad, concatenate and reverse on the device
against the StableHLO reference: spec examples, every dtype on both kernel paths, random
shapes and views (hypothesis), large aligned/misaligned copies, device-side clamping of
start indices (enqueue-only), and every error path."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from gpu_util import down, up
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tenferro_cuda as tc
from tenferro_cuda.configs.indexing import PadConfig, SliceConfig
from tenferro_cuda.debug import forbid_host_sync
from tenferro_cuda.tensor import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from reference import indexing_cases as cases  # noqa: E402
from reference import stablehlo as ref  # noqa: E402
from reference.indexing_tables import sample  # noqa: E402


def dev(s, array, view=False):
    array = np.asarray(array)
    if not view or array.ndim == 0:
        return s.upload_host_tensor(array)
    big = np.zeros(tuple(2 * n + 1 for n in array.shape), array.dtype)
    key = tuple(slice(1, 1 + 2 * n, 2) for n in array.shape)
    big[key] = array
    return up(s, big)[key]


def bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("case", cases.SLICE_EXAMPLES, ids=lambda c: c["id"])
def test_slice_examples(s, case):
    got = s.slice(up(s, case["x"]), SliceConfig(case["starts"], case["limits"],
                                                case["strides"]))
    np.testing.assert_array_equal(down(s, got), case["expected"])


@pytest.mark.parametrize("sdt", [np.int32, np.int64], ids=["i32", "i64"])
def test_dynamic_examples(s, sdt):
    d = cases.DYNAMIC_SLICE_EXAMPLE
    got = s.dynamic_slice(up(s, d["x"]), up(s, d["starts"].astype(sdt)), d["sizes"])
    np.testing.assert_array_equal(down(s, got), d["expected"])
    u = cases.DYNAMIC_UPDATE_SLICE_EXAMPLE
    got = s.dynamic_update_slice(up(s, u["x"]), up(s, u["update"]),
                                 up(s, u["starts"].astype(sdt)))
    np.testing.assert_array_equal(down(s, got), u["expected"])


@pytest.mark.parametrize("case", cases.PAD_EXAMPLES, ids=lambda c: c["id"])
def test_pad_examples(s, case):
    got = s.pad(up(s, case["x"]), PadConfig(case["low"], case["high"], case["interior"]))
    np.testing.assert_array_equal(down(s, got), case["expected"])


def test_reverse_and_concatenate_examples(s):
    r = cases.REVERSE_EXAMPLE
    np.testing.assert_array_equal(down(s, s.reverse(up(s, r["x"]), r["dims"])), r["expected"])
    a, b = np.arange(4, dtype=np.int32).reshape(2, 2), np.array([[5, 6]], np.int32)
    got = s.concatenate([up(s, a), up(s, b)], 0)
    np.testing.assert_array_equal(down(s, got), [[0, 1], [2, 3], [5, 6]])


@pytest.mark.parametrize("view", [False, True], ids=["dense", "view"])
@pytest.mark.parametrize("shape", [(3, 700), (5, 3), (2, 3, 4)], ids=str)
@pytest.mark.parametrize("dtype", tc.ALL_DTYPES, ids=lambda d: d.value)
def test_every_op_every_dtype(s, dtype, shape, view):
    rng = np.random.default_rng(9)
    x = sample(dtype, shape, rng)
    t = dev(s, x, view)
    cfg = SliceConfig([1] * len(shape), list(shape), [1] * (len(shape) - 1) + [2])
    np.testing.assert_array_equal(bits(down(s, s.slice(t, cfg))),
                                  bits(ref.slice_(x, cfg.starts, cfg.limits, cfg.strides)))
    np.testing.assert_array_equal(bits(down(s, s.reverse(t, (0, len(shape) - 1)))),
                                  bits(ref.reverse(x, (0, len(shape) - 1))))
    np.testing.assert_array_equal(bits(down(s, s.concatenate([t, t], len(shape) - 1))),
                                  bits(ref.concatenate([x, x], len(shape) - 1)))
    starts = np.array([-2] + [3] * (len(shape) - 1), np.int64)
    sizes = [max(n - 1, 0) for n in shape]
    np.testing.assert_array_equal(bits(down(s, s.dynamic_slice(t, up(s, starts), sizes))),
                                  bits(ref.dynamic_slice(x, starts, sizes)))
    upd = sample(dtype, sizes, rng)
    got = s.dynamic_update_slice(t, dev(s, upd, view), up(s, starts))
    np.testing.assert_array_equal(bits(down(s, got)),
                                  bits(ref.dynamic_update_slice(x, upd, starts)))
    value = True if dtype.is_bool else 7
    pcfg = PadConfig([1] + [-1] * (len(shape) - 1), [-1] + [2] * (len(shape) - 1),
                     [0] + [1] * (len(shape) - 1))
    want = ref.pad(x, np.asarray(value).astype(dtype.numpy), pcfg.low, pcfg.high,
                   pcfg.interior)
    np.testing.assert_array_equal(bits(down(s, s.pad(t, pcfg, value))), bits(want))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(shape=st.lists(st.integers(0, 5), max_size=4), data=st.data(), view=st.booleans())
def test_random_shapes(s, shape, data, view):
    x = np.arange(1, int(np.prod(shape)) + 1, dtype=np.float32).reshape(shape)
    t = dev(s, x, view)
    starts = [data.draw(st.integers(0, n)) for n in shape]
    limits = [data.draw(st.integers(a, n)) for a, n in zip(starts, shape)]
    steps = [data.draw(st.integers(1, 3)) for _ in shape]
    got = down(s, s.slice(t, SliceConfig(starts, limits, steps)))
    np.testing.assert_array_equal(got, ref.slice_(x, starts, limits, steps))
    dyn = np.array([data.draw(st.integers(-3, n + 3)) for n in shape], np.int64)
    sizes = [data.draw(st.integers(0, n)) for n in shape]
    got = down(s, s.dynamic_slice(t, dev(s, dyn.astype(np.int32), view), sizes))
    np.testing.assert_array_equal(got, ref.dynamic_slice(x, dyn, sizes))
    upd = -np.arange(int(np.prod(sizes)), dtype=np.float32).reshape(sizes)
    got = down(s, s.dynamic_update_slice(t, dev(s, upd, view), up(s, dyn)))
    np.testing.assert_array_equal(got, ref.dynamic_update_slice(x, upd, dyn))
    low = [data.draw(st.integers(-2, 2)) for _ in shape]
    high = [data.draw(st.integers(-2, 2)) for _ in shape]
    inner = [data.draw(st.integers(0, 2)) for _ in shape]
    if all(lo + hi + n + max(n - 1, 0) * it >= 0
           for n, lo, hi, it in zip(shape, low, high, inner)):
        got = down(s, s.pad(t, PadConfig(low, high, inner), -0.5))
        np.testing.assert_array_equal(got, ref.pad(x, -0.5, low, high, inner))
    axes = data.draw(st.lists(st.integers(0, max(len(shape) - 1, 0)), unique=True,
                              max_size=len(shape)))
    np.testing.assert_array_equal(down(s, s.reverse(t, axes)), ref.reverse(x, axes))


@pytest.mark.parametrize("cols,first", [(4096, 4), (4096, 1), (4099, 3)],
                         ids=["aligned", "misaligned", "odd"])
def test_large_slice_and_reverse(s, rng, cols, first):
    x = rng.standard_normal((1024, cols + 8)).astype(np.float32)
    t = up(s, x)
    got = down(s, s.slice(t, SliceConfig((0, first), (1024, first + cols))))
    np.testing.assert_array_equal(got, x[:, first:first + cols])
    np.testing.assert_array_equal(down(s, s.reverse(t, (1,))), x[:, ::-1])
    np.testing.assert_array_equal(down(s, s.reverse(t, (0,))), x[::-1])


def test_large_pad_and_concatenate(s, rng):
    x = rng.standard_normal((1000, 2000)).astype(np.float32)
    t = up(s, x)
    got = down(s, s.pad(t, PadConfig((3, -5), (-7, 9)), 1.5))
    np.testing.assert_array_equal(got, np.pad(x[:-7, 5:], ((3, 0), (0, 9)),
                                              constant_values=1.5))
    got = down(s, s.pad(t, PadConfig((0, 1), (0, 1), (1, 1))))
    want = np.zeros((1999, 4001), np.float32)
    want[::2, 1:-1:2] = x
    np.testing.assert_array_equal(got, want)
    parts = [x[:, :300], x[:, 300:1299], x[:, 1299:]]
    got = down(s, s.concatenate([t[:, :300], t[:, 300:1299], t[:, 1299:]], 1))
    np.testing.assert_array_equal(got, np.concatenate(parts, 1))


def test_dynamic_slices_clamp_on_device_and_only_enqueue(s, rng):
    x = rng.standard_normal((300, 1024)).astype(np.float32)
    t = up(s, x)
    starts = up(s, np.array([[297, 9], [-4, 9]], np.int64))[:, 0]  # a strided view
    s.dynamic_slice(t, starts, (8, 1024))  # compile outside the guard
    s.dynamic_update_slice(t, up(s, np.ones((8, 1024), np.float32)), starts)
    s.synchronize()
    with forbid_host_sync():
        a = s.dynamic_slice(t, starts, (8, 1024))
        b = s.dynamic_update_slice(t, up(s, np.ones((8, 1024), np.float32)), starts)
    np.testing.assert_array_equal(down(s, a), x[292:300])
    want = x.copy()
    want[292:300] = 1
    np.testing.assert_array_equal(down(s, b), want)
    np.testing.assert_array_equal(down(s, t), x)


def _f(s, shape=(4, 5), dtype=np.float32):
    return up(s, np.zeros(shape, dtype))


ERRORS = [
    ("slice-host", lambda s: s.slice(Tensor.from_numpy(np.zeros(3)), SliceConfig((0,), (1,))),
     tc.RuntimeStateError),
    ("slice-rank", lambda s: s.slice(_f(s), SliceConfig((0,), (1,))), tc.ValidationError),
    ("slice-limit", lambda s: s.slice(_f(s), SliceConfig((0, 0), (4, 6))),
     tc.ValidationError),
    ("slice-config", lambda s: s.slice(_f(s), ((0, 0), (1, 1))), tc.ValidationError),
    ("pad-rank", lambda s: s.pad(_f(s), PadConfig((0,), (0,))), tc.ValidationError),
    ("pad-negative", lambda s: s.pad(_f(s), PadConfig((-3, 0), (-3, 0))), tc.ValidationError),
    ("pad-value", lambda s: s.pad(_f(s, dtype=np.int8), PadConfig((0, 0), (1, 1)), 300),
     tc.ValidationError),
    ("reverse-duplicate", lambda s: s.reverse(_f(s), (1, 1)), tc.ValidationError),
    ("reverse-range", lambda s: s.reverse(_f(s), (2,)), tc.ValidationError),
    ("concat-dtype", lambda s: s.concatenate([_f(s), _f(s, dtype=np.float64)], 0),
     tc.ValidationError),
    ("concat-shape", lambda s: s.concatenate([_f(s), _f(s, (4, 6))], 0), tc.ValidationError),
    ("concat-empty", lambda s: s.concatenate([], 0), tc.ValidationError),
    ("concat-not-list", lambda s: s.concatenate(_f(s), 0), tc.ValidationError),
    ("dslice-float-starts", lambda s: s.dynamic_slice(_f(s), _f(s, (2,)), (1, 1)),
     tc.UnsupportedDTypeError),
    ("dslice-starts-length", lambda s: s.dynamic_slice(_f(s), _f(s, (3,), np.int32), (1, 1)),
     tc.ValidationError),
    ("dslice-size", lambda s: s.dynamic_slice(_f(s), _f(s, (2,), np.int32), (5, 1)),
     tc.ValidationError),
    ("dslice-host-starts", lambda s: s.dynamic_slice(_f(s), Tensor.from_numpy(
        np.zeros(2, np.int32)), (1, 1)), tc.RuntimeStateError),
    ("dus-too-big", lambda s: s.dynamic_update_slice(_f(s), _f(s, (5, 1)),
                                                     _f(s, (2,), np.int64)),
     tc.ValidationError),
    ("dus-dtype", lambda s: s.dynamic_update_slice(_f(s), _f(s, (1, 1), np.float64),
                                                   _f(s, (2,), np.int64)),
     tc.ValidationError),
]


@pytest.mark.parametrize("call,exc", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors(s, call, exc):
    with pytest.raises(exc):
        call(s)
    got = s.slice(up(s, np.arange(6, dtype=np.int32)), SliceConfig((1,), (4,)))
    np.testing.assert_array_equal(down(s, got), [1, 2, 3])  # the session still works
