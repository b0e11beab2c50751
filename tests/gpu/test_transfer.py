"""Uploads, downloads, residency, reclaim, memory pool, out of memory."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda.runtime import CudaRuntime
from tenferro_cuda.tensor import Tensor

SHAPES = [(), (0,), (1,), (7,), (3, 0, 2), (5, 3), (2, 3, 4, 5)]


def sample(dtype, shape, rng):
    if dtype == tc.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.is_complex:
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype.numpy)
    if dtype.is_integer:
        info = np.iinfo(dtype.numpy)
        return rng.integers(info.min, info.max, shape, dtype=dtype.numpy, endpoint=True)
    return rng.standard_normal(shape).astype(dtype.numpy)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", tc.ALL_DTYPES, ids=lambda d: d.value)
def test_round_trip(s, dtype, shape, rng):
    a = sample(dtype, shape, rng)
    t = up(s, a)
    assert t.shape == shape and t.dtype is dtype
    b = down(s, t)
    assert b.dtype == a.dtype and b.tobytes() == a.tobytes()


@pytest.mark.parametrize("dtype", [tc.float32, tc.complex128, tc.bfloat16, tc.int8],
                         ids=lambda d: d.value)
def test_non_contiguous_numpy_and_views(s, dtype, rng):
    a = sample(dtype, (6, 8), rng)
    view = a[::-2, 1::3]
    assert np.array_equal(down(s, s.upload_host_tensor(view)), view)
    t = up(s, a)
    for v in (t[::-2, 1::3], t.T, t[3], t[:, ::-1]):
        ref = a[::-2, 1::3] if v.shape == (3, 3) else None
        got = down(s, v)
        if ref is not None:
            assert np.array_equal(got, ref)
    assert np.array_equal(down(s, t.T), a.T)
    assert np.array_equal(down(s, t[:, ::-1]), a[:, ::-1])
    host = Tensor.from_numpy(a)
    assert np.array_equal(down(s, s.upload_host_tensor(host[1::2])), a[1::2])
    assert a.dtype != np.dtype(ml_dtypes.bfloat16) or down(s, t).dtype == a.dtype


def test_download_of_host_tensor_rejected(s):
    with pytest.raises(tc.RuntimeStateError):
        s.download_to_host(Tensor.from_numpy(np.ones(3)))


def test_ensure_gpu_resident(s):
    op = "mylib.op"
    s.ensure_gpu_resident(up(s, np.ones(3)), op)
    with pytest.raises(tc.RuntimeStateError, match="mylib.op.*host tensor"):
        s.ensure_gpu_resident(Tensor.from_numpy(np.ones(3)), op)
    rt2 = CudaRuntime.create_separate(0)
    try:
        buf = rt2.pool.alloc(12, rt2.exec_context().stream)
        foreign = Tensor._make(tc.float32, (3,), buffer=buf)
        with pytest.raises(tc.RuntimeStateError, match="mylib.op.*another runtime"):
            s.ensure_gpu_resident(foreign, op)
        del foreign, buf
    finally:
        rt2.close()
    t = up(s, np.ones(3))
    s.reclaim_buffer(t)
    with pytest.raises(tc.RuntimeStateError, match="mylib.op.*reclaimed"):
        s.ensure_gpu_resident(t, op)
    with pytest.raises(tc.RuntimeStateError, match="reclaimed"):
        s.download_to_host(t)


def test_out_of_memory_keeps_session_usable(s):
    total = s.device_info().total_memory
    with pytest.raises(tc.OutOfMemoryError) as info:
        s.upload_host_tensor(Tensor.from_numpy(np.zeros(1, np.uint8)))  # warm
        from tenferro_cuda.kernel_session import KernelSession  # noqa: F401
        with s.kernels("test.oom") as ks:
            ks.alloc_output(tc.uint8, (2 * total,))
    assert info.value.requested_bytes == 2 * total
    assert isinstance(info.value, MemoryError)
    assert down(s, up(s, np.arange(4))).tolist() == [0, 1, 2, 3]


def test_pool_statistics_limit_and_release(s):
    before = s.memory_stats()
    t = up(s, np.zeros(1 << 20, np.float32))
    mid = s.memory_stats()
    assert mid["live_bytes"] >= before["live_bytes"] + (4 << 20)
    del t
    s.synchronize()
    s.release_cached_memory()
    after = s.memory_stats()
    assert after["live_bytes"] == before["live_bytes"]
    assert after["reserved_bytes"] <= mid["reserved_bytes"]
    s.set_memory_limit(after["live_bytes"] + 1024)
    try:
        with pytest.raises(tc.OutOfMemoryError, match="limit"):
            up(s, np.zeros(4096, np.uint8))
        up(s, np.zeros(16, np.uint8))
    finally:
        s.set_memory_limit(None)


def _small_counts(dtype) -> list[int]:
    """Element counts just under, at and over the 8-byte pinned word."""
    per = 8 // dtype.itemsize
    return sorted({1, max(1, per - 1), max(1, per), per + 1})


@pytest.mark.parametrize("dtype", tc.ALL_DTYPES, ids=lambda d: d.value)
def test_small_transfers_around_the_pinned_word(s, dtype, rng):
    arrays = [sample(dtype, (n,), rng) for n in _small_counts(dtype)]
    arrays += [sample(dtype, (), rng), sample(dtype, (0,), rng), sample(dtype, (1, 1), rng)]
    for a in arrays:  # round trips: each upload finds the word free
        b = down(s, up(s, a))
        assert b.shape == a.shape and b.dtype == a.dtype and b.tobytes() == a.tobytes()
    tensors = [up(s, a) for a in arrays]  # uploads in a row: the word is busy after one
    s.synchronize()
    tensors += [up(s, a) for a in arrays]
    for a, t in zip(arrays + arrays, tensors):
        assert down(s, t).tobytes() == a.tobytes()


def test_small_upload_takes_the_values_at_the_call(s):
    a = np.array([1.5], np.float32)
    t = up(s, a)  # through the word or from pageable memory: copied before return
    a[0] = 2.5
    u = up(s, a)
    a[0] = 3.5
    assert down(s, t).tolist() == [1.5] and down(s, u).tolist() == [2.5]
    many = [up(s, np.array([i], np.int64)) for i in range(200)]
    big = up(s, np.arange(4096, dtype=np.float64))
    assert [int(down(s, t)[0]) for t in many] == list(range(200))
    assert np.array_equal(down(s, big), np.arange(4096, dtype=np.float64))


def test_small_download_of_views(s):
    t = up(s, np.arange(10, dtype=np.float32))
    assert down(s, t[::5]).tolist() == [0.0, 5.0]  # materialized, then through the word
    assert down(s, t[3]).tolist() == 3.0
    assert down(s, t[9:3:-3]).tolist() == [9.0, 6.0]
