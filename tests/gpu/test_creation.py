"""Creation ops on the GPU (iota, full, zeros, ones, empty) against numpy: every dtype,
shapes and dimensions, the 64-bit index path of iota, filled on the device with no host
upload and no host synchronisation; validation before anything is allocated; the numpy
protocol and repr of device tensors."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda import _driver_memory
from tenferro_cuda.debug import forbid_host_sync
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError

D = DType
NUMERIC = [d for d in ALL_DTYPES if d.is_numeric]


def iota_ref(dtype: DType, shape, dim) -> np.ndarray:
    shp = [1] * len(shape)
    shp[dim] = shape[dim]
    idx = np.arange(shape[dim], dtype=np.int64).reshape(shp)
    return np.ascontiguousarray(np.broadcast_to(idx, shape).astype(dtype.numpy))


@pytest.fixture
def no_upload(monkeypatch):
    """Creation must not copy anything from the host."""
    def refuse(*args, **kwargs):
        raise AssertionError("a creation op uploaded from the host")
    monkeypatch.setattr(_driver_memory, "memcpy_htod_async", refuse)


SHAPES = [((7,), 0), ((33, 65), 0), ((33, 65), 1), ((4, 1, 300), 2), ((5, 6, 7), 1),
          ((0, 4), 1), ((3, 1), 1), ((4097,), 0)]
CASES = [(d, shape, dim) for d in NUMERIC for shape, dim in SHAPES
         if not d.is_integer or shape[dim] <= np.iinfo(d.numpy).max + 1]


@pytest.mark.parametrize("dtype,shape,dim", CASES,
                         ids=[f"{d.value}-{s}-{a}" for d, s, a in CASES])
def test_iota(s, no_upload, dtype, shape, dim):
    with forbid_host_sync():
        t = s.iota(dtype, shape, dim)
    got = down(s, t)
    want = iota_ref(dtype, shape, dim)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype,steps", [(D.INT16, 32768), (D.UINT16, 65536)], ids=str)
def test_iota_fills_a_16_bit_range_and_no_more(s, dtype, steps):
    got = down(s, s.iota(dtype, (2, steps), 1))
    assert np.array_equal(got, np.broadcast_to(np.arange(steps).astype(dtype.numpy),
                                               (2, steps)))
    with pytest.raises(ValidationError) as info:
        s.iota(dtype, steps + 1, 0)
    assert info.value.kind == "overflow"


def test_iota_float_rounding(s):
    with np.errstate(over="ignore"):  # past 65504 float16 is inf, as on the device
        want = np.arange(70000).astype(np.float16)
    assert np.array_equal(down(s, s.iota(D.FLOAT16, 70000, 0)), want)
    assert np.array_equal(down(s, s.iota(D.BFLOAT16, (3, 1000), 1)).astype(np.float32),
                          iota_ref(D.BFLOAT16, (3, 1000), 1).astype(np.float32))


def test_iota_64_bit_index(s):
    """2^31 elements: the u64 index instantiation."""
    t = s.iota(D.INT8, (1 << 24, 128), 1)
    for rows in (t[:2], t[(1 << 24) - 2:]):
        got = down(s, s.to_contiguous_read(rows))
        assert np.array_equal(got, np.broadcast_to(np.arange(128, dtype=np.int8), (2, 128)))
    s.reclaim_buffer(t)


FULL = [(D.BOOL, True), (D.INT8, -128), (D.UINT8, 200), (D.INT16, -32768), (D.UINT16, 65535),
        (D.UINT32, 2**32 - 1), (D.UINT64, 2**64 - 1), (D.INT32, -7), (D.INT64, 1 << 62),
        (D.FLOAT16, -0.0), (D.BFLOAT16, 3.5), (D.FLOAT32, float("nan")),
        (D.FLOAT64, -float("inf")), (D.COMPLEX64, 1.5 - 2j), (D.COMPLEX128, 0)]


@pytest.mark.parametrize("dtype,value", FULL, ids=str)
@pytest.mark.parametrize("shape", [(), (5,), (129, 33), (0, 2)], ids=str)
def test_full(s, no_upload, dtype, value, shape):
    with forbid_host_sync():
        t = s.full(shape, value, dtype)
    want = np.full(shape, value, dtype.numpy)
    got = down(s, t)
    assert got.dtype == want.dtype  # bits compared flat: a 0-d array views no other size
    assert np.array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.value)
def test_zeros_ones_empty(s, no_upload, dtype):
    with forbid_host_sync():
        z, o = s.zeros((3, 1025), dtype), s.ones(3075, dtype)
        e = s.empty((3, 1025), dtype)
    assert np.array_equal(down(s, z), np.zeros((3, 1025), dtype.numpy))
    assert np.array_equal(down(s, o), np.ones(3075, dtype.numpy))
    assert e.shape == (3, 1025) and e.dtype is dtype and e.is_device
    s.copy_read_into(o[:3075].view((3, 1025), (1025, 1)), e)  # written before it is read
    assert np.array_equal(down(s, e), np.ones((3, 1025), dtype.numpy))


def test_results_feed_other_ops(s):
    x = s.iota(D.FLOAT32, (4, 8), 1)
    y = s.mul(x, s.full((), 0.5, D.FLOAT32))
    assert np.array_equal(down(s, y), iota_ref(D.FLOAT32, (4, 8), 1) * np.float32(0.5))
    mask = s.bitwise_not(s.zeros((4, 8), D.BOOL))
    assert down(s, mask).all()


@pytest.mark.parametrize("call,exc", [
    (lambda s: s.iota(D.BOOL, (3,), 0), UnsupportedDTypeError),
    (lambda s: s.iota(D.INT8, (200,), 0), ValidationError),
    (lambda s: s.iota(D.INT32, (3, 4), 2), ValidationError),
    (lambda s: s.full((3,), 300, D.UINT8), ValidationError),
    (lambda s: s.full((3,), 1j, D.FLOAT64), ValidationError),
    (lambda s: s.zeros((-2, 3), D.FLOAT32), ValidationError),
    (lambda s: s.empty((4,), "float8"), UnsupportedDTypeError),
], ids=["iota-bool", "iota-overflow", "iota-dim", "full-overflow", "full-complex",
        "negative-shape", "bad-dtype"])
def test_rejected_before_allocation(s, call, exc):
    before = s.memory_stats()["allocations"]
    with pytest.raises(exc):
        call(s)
    assert s.memory_stats()["allocations"] == before


def test_device_tensors_and_numpy(s):
    t = s.zeros((2, 3), D.FLOAT32)
    assert repr(t) == "Tensor(shape=(2, 3), dtype=float32, device 0)"
    assert repr(t.T) == "TensorView(shape=(3, 2), dtype=float32, device 0)"
    with pytest.raises(TypeError, match="download_to_host"):
        np.asarray(t)
    host = s.download_to_host(t)
    assert np.array_equal(np.asarray(host), np.zeros((2, 3), np.float32))
    assert np.dtype(tc.float32) == np.float32
    u = up(s, np.arange(3))
    assert np.array_equal(np.asarray(s.download_to_host(u)), np.arange(3))
