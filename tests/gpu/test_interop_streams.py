"""Stream ordering across libraries with a busy producer, both ways: a spin kernel still
runs (and the data is written after it) when the consumer takes the array, so only the
ordering makes the values right. DLPack with CuPy and JAX (PyTorch's cases are in
test_interop_sync.py), the CUDA Array Interface with CuPy, and the ``__cuda_stream__``
protocol with cuda.core and PyTorch: our stream handed to them, theirs handed to us.
Each peer is skipped when absent or without a GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest
from gpu_util import down, up
from test_interop_sync import SPIN_CYCLES, SPIN_SRC, _our_stream, _spin_then_copy

from tenferro_cuda import _driver, _driver_memory

N = 1 << 20


@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


@pytest.fixture(scope="module")
def cupy():
    return pytest.importorskip("cupy")


@pytest.fixture(scope="module")
def jax():
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    try:
        jax.devices("gpu")
    except RuntimeError:
        pytest.skip("JAX has no GPU backend")
    return jax


@pytest.fixture(scope="module")
def core():
    """cuda.core's names (``cuda.core`` 1.x, or ``cuda.core.experimental`` before)."""
    try:
        import cuda.core as module

        module.Stream  # noqa: B018 - 1.x exports it at the top
    except (ImportError, AttributeError):
        try:
            import cuda.core.experimental as module
        except ImportError:
            pytest.skip("cuda.core is not installed")
    return module


def _busy(s) -> bool:
    return not _driver.stream_query(_our_stream(s))


def _ready_pair(s, dtype=np.float32):
    want = np.arange(N, dtype=dtype)
    src, dst = up(s, want), up(s, np.zeros_like(want))
    s.synchronize()
    return want, src, dst


# --- DLPack: CuPy ---------------------------------------------------------------------------

def _cupy_spin(cupy):
    """CuPy's spin kernel, compiled, and CuPy's fill kernel compiled too: a first ``fill``
    inside the timed window would compile (cold cache) for longer than the spin lasts."""
    spin = cupy.RawKernel(SPIN_SRC, "spin")
    spin.compile()
    cupy.zeros(1, dtype=cupy.float32).fill(1.0)
    return spin


def test_import_waits_for_busy_cupy_stream(s, cupy):
    spin = _cupy_spin(cupy)
    y = cupy.zeros(N, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        spin((1,), (1,), (np.int64(SPIN_CYCLES),))
        y.fill(7.0)
        t = s.from_dlpack(y)  # cupy's current stream is the one writing y
    assert not side.done, "the producer finished too early for this test to mean much"
    assert np.all(down(s, t) == 7)


def test_cai_import_waits_for_busy_cupy_stream(s, cupy):
    spin = _cupy_spin(cupy)
    y = cupy.zeros(N, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    side = cupy.cuda.Stream(non_blocking=True)
    with side:
        spin((1,), (1,), (np.int64(SPIN_CYCLES),))
        y.fill(5.0)
        iface = dict(y.__cuda_array_interface__)
    iface["stream"] = None  # name the stream through stream= instead
    t = s.from_cuda_array_interface(iface, stream=side.ptr)
    assert not side.done
    assert np.all(down(s, t) == 5)
    del y


# --- DLPack: JAX, both ways ------------------------------------------------------------------

def test_export_orders_jax_after_our_stream(s, jax):
    want, src, dst = _ready_pair(s)
    _spin_then_copy(s, dst, src)
    x = jax.numpy.from_dlpack(dst)
    assert _busy(s), "our stream finished too early"
    np.testing.assert_array_equal(np.asarray(x), want)


def test_import_waits_for_busy_jax(s, jax):
    jnp = jax.numpy
    m = jnp.eye(4096, dtype=jnp.float32) * 0.5
    a = jnp.ones((4096, 4096), dtype=jnp.float32)
    loop = jax.jit(lambda a, m: jax.lax.fori_loop(0, 300, lambda i, x: jnp.tanh(x @ m) + 1, a))
    loop(a, m).block_until_ready()  # compiled out of the timed part
    y = loop(a, m)
    if not hasattr(y, "is_ready"):
        pytest.skip("this JAX cannot tell whether an array is ready")
    t = s.from_dlpack(y)
    assert not y.is_ready(), "JAX finished too early for this test to mean much"
    got = down(s, t)
    np.testing.assert_array_equal(got, np.asarray(y))
    back = jnp.from_dlpack(t)  # and back to JAX, ordered after our stream
    np.testing.assert_array_equal(np.asarray(back), got)


# --- __cuda_stream__: cuda.core ----------------------------------------------------------

def test_cuda_core_waits_for_our_stream(s, core):
    dev = core.Device(0)
    dev.set_current()
    ours = dev.create_stream(s.stream)  # through __cuda_stream__
    assert int(ours.handle) == s.stream_handle
    want, src, dst = _ready_pair(s)
    other = dev.create_stream()
    _spin_then_copy(s, dst, src)
    other.wait(ours)
    assert _busy(s), "our stream finished too early"
    host = np.zeros_like(want)
    _driver_memory.memcpy_dtoh_async(host.ctypes.data, dst.data_ptr(), host.nbytes,
                                     _driver.stream_handle(int(other.handle)))
    other.sync()
    np.testing.assert_array_equal(host, want)


def test_we_wait_for_a_cuda_core_stream(s, core):
    dev = core.Device(0)
    dev.set_current()
    other = dev.create_stream()
    arch = "".join(str(v) for v in dev.compute_capability)
    program = core.Program(SPIN_SRC, code_type="c++",
                           options=core.ProgramOptions(arch=f"sm_{arch}"))
    spin = program.compile("cubin").get_kernel("spin")
    want, src, dst = _ready_pair(s)
    core.launch(other, core.LaunchConfig(grid=1, block=1), spin, np.int64(SPIN_CYCLES))
    _driver_memory.memcpy_dtod_async(dst.data_ptr(), src.data_ptr(), want.nbytes,
                                     _driver.stream_handle(int(other.handle)))
    t = s.from_dlpack(dst, stream=other)  # the data was written on cuda.core's stream
    assert not _driver.stream_query(_driver.stream_handle(int(other.handle)))
    np.testing.assert_array_equal(down(s, t), want)
    other.sync()


# --- __cuda_stream__: PyTorch ----------------------------------------------------------------

def _torch_stream_arg(side):
    """The stream object itself where PyTorch speaks the protocol, else its handle."""
    return side if hasattr(side, "__cuda_stream__") else side.cuda_stream


def test_torch_waits_for_our_stream_object(s, torch):
    want, src, dst = _ready_pair(s)
    ext = torch.cuda.ExternalStream(int(s.stream))
    side = torch.cuda.Stream()
    x = torch.from_dlpack(dst.__dlpack__(stream=-1))  # unordered: the wait below orders it
    _spin_then_copy(s, dst, src)
    side.wait_stream(ext)
    assert _busy(s)
    with torch.cuda.stream(side):
        got = x.cpu().numpy()
    np.testing.assert_array_equal(got, want)


def test_we_wait_for_a_torch_stream(s, torch):
    y = torch.zeros(N, device="cuda:0")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN_CYCLES)
        y.fill_(3.0)
    t = s.from_dlpack(y, stream=_torch_stream_arg(side))
    assert not side.query()
    assert np.all(down(s, t) == 3)


def test_export_to_a_torch_stream_object(s, torch):
    want, src, dst = _ready_pair(s)
    side = torch.cuda.Stream()
    _spin_then_copy(s, dst, src)
    capsule = dst.__dlpack__(stream=_torch_stream_arg(side))  # legacy: every torch takes it
    x = torch.from_dlpack(capsule)
    assert _busy(s)
    with torch.cuda.stream(side):  # side waits for our stream: the capsule's event
        got = x.cpu().numpy()
    np.testing.assert_array_equal(got, want)


def test_torch_work_on_our_stream_needs_no_event(s, torch):
    """PyTorch running on our stream (ExternalStream) and our import naming that stream:
    no event on either side, and the order is the stream's own."""
    from tenferro_cuda import _foreign

    ext = torch.cuda.ExternalStream(int(s.stream))
    made = _foreign.events_created()
    with torch.cuda.stream(ext):
        y = torch.full((N,), 9.0, device="cuda:0")
    t = s.from_dlpack(y, stream=s.stream)
    assert np.all(down(s, t) == 9) and _foreign.events_created() == made
