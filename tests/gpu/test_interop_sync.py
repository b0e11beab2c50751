"""Interop ordering, lifetime and refusals: busy producer/consumer streams (events, no
host wait), keep-alive of producers, the deleter, the CUDA Array Interface both ways, and
host or other-device arrays rejected."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda import _driver, _driver_fast, _foreign
from tenferro_cuda._dlpack_export import live_exports
from tenferro_cuda.ops import interop
from tenferro_cuda.raw import KernelArg, LaunchConfig
from tenferro_cuda.runtime import CudaRuntime

SPIN_SRC = r'''
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
'''
SPIN_CYCLES = 1_500_000_000  # ~0.75 s at 2 GHz


@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


@pytest.fixture(scope="module")
def cupy():
    return pytest.importorskip("cupy")


def _our_stream(s):
    return _driver.stream_handle(s.stream_handle)


def _spin_then_copy(s, dst, src) -> None:
    """Enqueue a long spin kernel and then dst <- src on the session stream."""
    with s.raw("test.interop.spin") as raw:
        fn = raw.compile_nvrtc(SPIN_SRC).function("spin")
        raw.launch(fn, LaunchConfig(1, 1), [KernelArg.i64(SPIN_CYCLES)])
        raw.copy_bytes(dst, src, src.nbytes)


# --- producer busy: its stream must be waited on (event), not the host ------------------------

def _busy_torch_result(torch, side):
    """On ``side``: a ~0.75 s spin (torch's own test kernel), then y <- 7 (y was 0)."""
    y = torch.zeros(1 << 20, device="cuda:0")
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN_CYCLES)
        y.fill_(7.0)
    return y


@pytest.mark.parametrize("where", ["side-stream", "default-stream"])
def test_import_waits_for_busy_torch_stream(s, torch, where, monkeypatch):
    s.from_dlpack(torch.zeros(4, device="cuda:0"))  # first-use costs out of the timed part
    side = torch.cuda.Stream() if where == "side-stream" else torch.cuda.default_stream()
    y = _busy_torch_result(torch, side)
    assert not side.query(), "the busy work finished before the import began"
    asked = []
    real = torch.Tensor.__dlpack__

    def spy(self, *args, **kwargs):
        asked.append(kwargs.get("stream"))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "__dlpack__", spy)
    with torch.cuda.stream(side):  # the producer's current stream is the one writing y
        t = s.from_dlpack(y)
    assert not side.query(), "the producer finished too early for this test to mean much"
    got = down(s, t)  # waits on our stream only
    assert np.all(got == 7)
    assert asked == [-1]  # PyTorch's stream was read directly: nothing asked of PyTorch


class _CaiProducer:
    """A CUDA Array Interface v3 producer whose data is written on ``stream``."""

    def __init__(self, tensor, stream: int) -> None:
        self.tensor = tensor
        self.__cuda_array_interface__ = {
            "shape": tuple(tensor.shape), "typestr": "<f4", "strides": None,
            "data": (tensor.data_ptr(), False), "version": 3, "stream": stream}


def test_import_cai_waits_for_busy_producer_stream(s, torch):
    s.from_cuda_array_interface(_CaiProducer(torch.zeros(4, device="cuda:0"), 1))
    side = torch.cuda.Stream()
    y = _busy_torch_result(torch, side)
    assert not side.query(), "the busy work finished before the import began"
    t = s.from_cuda_array_interface(_CaiProducer(y, side.cuda_stream))
    assert not side.query(), "the producer finished too early for this test to mean much"
    assert np.all(down(s, t) == 7)


# --- consumer of our busy stream -------------------------------------------------------------

@pytest.mark.parametrize("where", ["default-stream", "side-stream"])
def test_export_orders_torch_after_our_stream(s, torch, where):
    want = np.arange(1 << 20, dtype=np.float32)
    src, dst = up(s, want), up(s, np.zeros_like(want))
    # (PyTorch's CUDA set up before the spin: a first use in this process may take
    # longer than the spin runs)
    side = torch.cuda.Stream() if where == "side-stream" else torch.cuda.default_stream()
    torch.cuda.synchronize()
    s.synchronize()
    _spin_then_copy(s, dst, src)
    with torch.cuda.stream(side):
        x = torch.from_dlpack(dst)
        assert not _driver.stream_query(_our_stream(s)), "our stream finished too early"
        got = x.cpu().numpy()  # torch's stream waits for ours through the event
    np.testing.assert_array_equal(got, want)


def test_export_orders_cupy_after_our_stream(s, cupy):
    want = np.arange(1 << 20, dtype=np.int32)
    src, dst = up(s, want), up(s, np.zeros_like(want))
    side = cupy.cuda.Stream(non_blocking=True)  # (CuPy set up before the spin)
    cupy.cuda.Device().synchronize()
    s.synchronize()
    _spin_then_copy(s, dst, src)
    with side:
        x = cupy.from_dlpack(dst)
        assert not _driver.stream_query(_our_stream(s))
        got = cupy.asnumpy(x)
    np.testing.assert_array_equal(got, want)


def test_export_cai_names_our_stream(s, cupy):
    want = np.arange(1 << 20, dtype=np.float64)
    src, dst = up(s, want), up(s, np.zeros_like(want))
    s.synchronize()
    _spin_then_copy(s, dst, src)
    assert dst.__cuda_array_interface__["stream"] == s.stream_handle
    x = cupy.asarray(dst)  # CuPy synchronizes on the interface's stream (v3)
    assert x.data.ptr == dst.data_ptr()
    np.testing.assert_array_equal(cupy.asnumpy(x), want)


# --- lifetime ----------------------------------------------------------------------------------

def test_torch_producer_kept_alive(s, torch):
    want = np.arange(4096, dtype=np.float32)
    x = torch.from_numpy(want).cuda()
    gc.collect()  # earlier tests' garbage must not be freed inside the measured window
    torch.cuda.synchronize()
    used = torch.cuda.memory_allocated()
    t = s.from_dlpack(x)
    del x
    gc.collect()
    junk = torch.full((4096,), -1.0, device="cuda:0")  # would reuse x's block if it were free
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() >= used + junk.numel() * 4
    np.testing.assert_array_equal(down(s, t), want)
    s.synchronize()
    del t
    gc.collect()
    _foreign.drain()
    assert torch.cuda.memory_allocated() == used - want.nbytes + junk.numel() * 4


class Exposes:
    """A producer object exposing a CuPy array's interface (and supporting weakrefs)."""

    def __init__(self, array):
        self.array = array

    @property
    def __cuda_array_interface__(self):
        return self.array.__cuda_array_interface__


def test_reclaim_adopted_releases_producer(s, cupy):
    x = Exposes(cupy.arange(1000, dtype=cupy.float32))
    alive = weakref.ref(x)
    t = s.from_cuda_array_interface(x)
    np.testing.assert_array_equal(down(s, t), np.arange(1000, dtype=np.float32))
    del x
    gc.collect()
    assert alive() is not None
    s.synchronize()
    s.reclaim_buffer(t)
    gc.collect()
    _foreign.drain()
    assert alive() is None
    with pytest.raises(tc.RuntimeStateError, match="reclaimed"):
        down(s, t)



def _spin(s) -> None:
    with s.raw("test.interop.spin") as raw:
        fn = raw.compile_nvrtc(SPIN_SRC).function("spin")
        raw.launch(fn, LaunchConfig(1, 1), [KernelArg.i64(SPIN_CYCLES)])


@pytest.mark.parametrize("path", ["dlpack", "cai"])
def test_a_producer_dropped_while_our_stream_runs_goes_at_synchronize(s, torch, path):
    """Dropped while our stream is busy, the adopted array is parked (its memory may
    still be read); the synchronize that waits for the stream lets it go, with no
    interop call and no explicit drain."""
    x = torch.arange(1 << 20, device="cuda:0", dtype=torch.float32)
    torch.cuda.synchronize()
    gc.collect()
    s.synchronize()
    parked = _foreign.parked_count()  # (0 unless an earlier test left a stream busy)
    holder = Exposes(x)
    alive = weakref.ref(holder)
    t = s.from_dlpack(x) if path == "dlpack" else s.from_cuda_array_interface(holder)
    _spin(s)
    del holder, x
    used = torch.cuda.memory_allocated()
    del t
    gc.collect()
    assert _foreign.parked_count() == parked + 1, "the stream finished before the drop"
    assert torch.cuda.memory_allocated() == used  # kept: our spin may still read it
    s.synchronize()
    assert _foreign.parked_count() == parked
    gc.collect()
    assert alive() is None
    assert torch.cuda.memory_allocated() == used - (1 << 22)


@pytest.mark.parametrize("path", ["dlpack", "cai"])
def test_a_producer_parked_on_a_runtime_goes_when_the_runtime_closes(torch, monkeypatch,
                                                                      path):
    """Dropped while the stream of a runtime counts as busy, the adopted array waits; the
    runtime's close (every stream synchronized, then destroyed) lets it go, with no
    interop call, no synchronize and no explicit drain."""
    x = torch.arange(1 << 20, device="cuda:0", dtype=torch.float32)
    torch.cuda.synchronize()
    gc.collect()
    parked = _foreign.parked_count()
    rt = CudaRuntime.create_separate(0)
    try:
        ctx = rt.exec_context()
        holder = Exposes(x)  # (the CAI path keeps the producer object; DLPack, memory)
        kept = weakref.ref(holder if path == "cai" else x)
        with rt.current():
            t = interop.from_dlpack(ctx, x) if path == "dlpack" \
                else interop.from_cuda_array_interface(ctx, holder)
        del holder, x
        used = torch.cuda.memory_allocated()
        with monkeypatch.context() as busy:  # (a query that always finds work pending)
            busy.setattr(_driver_fast, "stream_query", lambda stream: False)
            del t
            gc.collect()
            assert _foreign.parked_count() == parked + 1
        gc.collect()
        assert _foreign.parked_count() == parked + 1
        assert torch.cuda.memory_allocated() == used  # kept while it waits
        if path == "cai":
            assert kept() is not None
    finally:
        rt.close()
    assert _foreign.parked_count() == parked
    gc.collect()
    assert kept() is None
    assert torch.cuda.memory_allocated() == used - (1 << 22)


def test_cupy_producer_kept_alive_through_dlpack(s, cupy):
    x = cupy.arange(10_000, dtype=cupy.int64)[::-3]
    want = cupy.asnumpy(x)
    t = s.from_dlpack(x)
    del x
    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()
    junk = cupy.full(10_000, -1, dtype=cupy.int64)
    np.testing.assert_array_equal(down(s, t), want)
    del junk


def test_exported_tensor_kept_alive_until_deleter(s, torch):
    want = np.arange(1 << 16, dtype=np.float32)
    t = up(s, want)
    x = torch.from_dlpack(t)
    alive = weakref.ref(t)
    del t
    gc.collect()
    assert alive() is not None  # the capsule's record holds it
    junk = up(s, np.full(1 << 16, -1, np.float32))  # our pool must not hand t's memory out
    np.testing.assert_array_equal(x.cpu().numpy(), want)
    del x
    gc.collect()
    assert alive() is None
    del junk


def test_unconsumed_capsule_released(s):
    t = up(s, np.arange(5.0))
    capsule = t.__dlpack__(stream=s.stream_handle, max_version=(1, 0))
    assert live_exports(t) == 1
    del capsule
    gc.collect()
    assert live_exports(t) == 0


# --- CAI both ways ------------------------------------------------------------------------------

@pytest.mark.parametrize("view", ["contiguous", "transposed", "negative"])
def test_cai_round_trip_cupy(s, cupy, view):
    base = np.arange(48, dtype=np.complex64).reshape(6, 8) * (1 - 2j)
    make = {"contiguous": lambda a: a, "transposed": lambda a: a.T,
            "negative": lambda a: a[::-1, ::2]}[view]
    x = make(cupy.asarray(base))
    t = s.from_cuda_array_interface(x)
    assert t.data_ptr() == x.data.ptr
    np.testing.assert_array_equal(down(s, t), make(base))
    y = cupy.asarray(make(up(s, base)))
    np.testing.assert_array_equal(cupy.asnumpy(y), make(base))


def test_cai_to_torch(s, torch):
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    t = up(s, base).T
    s.synchronize()
    x = torch.as_tensor(t, device="cuda:0")
    assert x.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(x.cpu().numpy(), base.T)
    back = s.from_cuda_array_interface(x)
    np.testing.assert_array_equal(down(s, back), base.T)


def test_cai_bfloat16_refused(s):
    t = up(s, np.zeros(4, dtype=tc.bfloat16.numpy))
    with pytest.raises(tc.UnsupportedDTypeError, match="DLPack"):
        t.__cuda_array_interface__  # noqa: B018


# --- refusals ------------------------------------------------------------------------------------

def test_host_arrays_rejected(s, torch):
    for obj in (np.arange(4.0), torch.arange(4.0), tc.Tensor.from_numpy(np.arange(3))):
        with pytest.raises(tc.ValidationError, match="upload_host_tensor"):
            s.from_dlpack(obj)
    with pytest.raises(tc.ValidationError, match="upload_host_tensor"):
        s.from_cuda_array_interface(np.arange(4.0).__array_interface__)
    with pytest.raises(tc.ValidationError, match="__dlpack__"):
        s.from_dlpack([1.0, 2.0])


def test_other_device_rejected(s, torch):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs a second GPU")
    x = torch.ones(4, device="cuda:1")
    with pytest.raises(tc.RuntimeStateError, match="CUDA device 1"):
        s.from_dlpack(x)
    with pytest.raises(tc.RuntimeStateError, match="CUDA device 1"):
        s.from_cuda_array_interface(x)



def test_a_tensor_that_requires_grad_leaves_later_imports_alone(s, torch):
    """PyTorch refuses to export a tensor that requires grad (BufferError from 2.10 on,
    RuntimeError before): the import fails, and the next tensor is still asked with -1
    (the cheap request), not with stream 1 for good."""
    from tenferro_cuda.ops import interop

    x = torch.ones(8, device="cuda:0", requires_grad=True)
    with pytest.raises((tc.ValidationError, RuntimeError), match="gradient"):
        s.from_dlpack(x)
    assert torch.Tensor not in interop._no_sync_refused
    with pytest.raises(RuntimeError, match="grad"):  # PyTorch's own property refuses it
        s.from_cuda_array_interface(x)
    y = torch.arange(8.0, device="cuda:0")
    np.testing.assert_array_equal(down(s, s.from_dlpack(y)), np.arange(8.0))
    np.testing.assert_array_equal(down(s, s.from_dlpack(x.detach())), np.ones(8))

def test_export_refusals(s):
    t = up(s, np.arange(4.0))
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(1, 0))
    assert t.__dlpack_device__() == (2, 0)
