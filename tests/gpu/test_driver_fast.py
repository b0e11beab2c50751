"""The hot driver calls on a device: the bindings in use, the current context as an int,
a refused launch as a typed error with the session still usable, ordering between two
streams, and the whole op path with the legacy bindings forced (a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda import _driver, _driver_fast
from tenferro_cuda.errors import BackendSourceError

ROOT = Path(__file__).resolve().parents[2]


def test_the_v2_module_is_used_when_installed():
    try:
        from cuda.bindings._v2 import driver  # noqa: F401
    except ImportError:
        assert _driver_fast.BINDINGS == "cuda.bindings.driver"
    else:
        assert _driver_fast.BINDINGS == "cuda.bindings._v2.driver"


def test_current_is_the_context_as_an_int(s):
    assert _driver_fast.current() == _driver.current_context_id() == s._ctx.context_id


def test_a_refused_launch_is_a_typed_error_and_the_session_goes_on(s):
    x = up(s, np.arange(8, dtype=np.float32))
    with pytest.raises(_driver_fast.Failure) as info:  # a NULL function
        _driver_fast.launch(0, 1, 1, 1, 32, 1, 1, 0, int(s._ctx.stream), 0, 0)
    status = info.value.status  # type: ignore[attr-defined]
    assert status != 0
    with pytest.raises(BackendSourceError, match="cuLaunchKernel"):
        _driver.launch_failed(status, "probe")
    assert np.array_equal(down(s, s.add(x, x)), 2 * np.arange(8, dtype=np.float32))


def test_order_makes_one_stream_wait_for_another(s):
    """A spin on a side stream, then an ordered copy on the session stream: the copy sees
    what the spin wrote."""
    from tenferro_cuda._foreign import order

    side = _driver.stream_create()
    try:
        src = up(s, np.zeros(1 << 20, np.float32))
        s.synchronize()
        with s.raw("probe") as r:
            module = r.compile_nvrtc(r'''
extern "C" __global__ void slow_fill(float* p, int n) {
    long long t0 = clock64();
    while (clock64() - t0 < 20000000) {}
    for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = 3.0f;
}''')
            fn = module.function("slow_fill")
            from cuda.bindings import driver as d

            from tenferro_cuda.kernels.args import ArgPack

            pack = ArgPack("Pi")
            params = pack.pack(src.data_ptr(), 1 << 20)
            d.cuLaunchKernel(fn._fn, 1, 1, 1, 256, 1, 1, 0, side, params, 0)
        order(s._ctx, s._ctx.stream, side)
        got = down(s, s.add(src, src))
        assert np.all(got == 6.0)
    finally:
        _driver.stream_synchronize(side)
        _driver.stream_destroy(side)


def test_stream_query_says_busy_then_idle(s):
    """What a release asks: False while a spin runs on the stream, True once it is done
    (a default stream answers too)."""
    with s.raw("probe") as r:
        module = r.compile_nvrtc(r'''
extern "C" __global__ void spin_a_while() {
    long long t0 = clock64();
    while (clock64() - t0 < 200000000) {}
}''')
        fn = module.function("spin_a_while")
        stream = s._ctx.stream
        h = _driver_fast.handle
        _driver_fast.launch(h(fn._fn), 1, 1, 1, 1, 1, 1, 0, h(stream), 0, 0)
        assert _driver_fast.stream_query(stream) is False
    s.synchronize()
    assert _driver_fast.stream_query(s._ctx.stream) is True
    assert _driver_fast.stream_query(_driver.stream_handle(1)) in (True, False)


def test_ops_run_with_the_legacy_bindings_forced():
    """The same op path through ``cuda.bindings.driver`` (TENFERRO_CUDA_DRIVER_BINDINGS=
    legacy): elementwise fast and general paths, a refused op, interop ordering."""
    code = textwrap.dedent('''
        import numpy as np
        import tenferro_cuda as tc
        from tenferro_cuda import _driver_fast
        assert _driver_fast.BINDINGS == "cuda.bindings.driver", _driver_fast.BINDINGS
        with tc.cuda_exec_session(0) as s:
            a = s.upload_host_tensor(np.arange(1024, dtype=np.float32))
            for _ in range(3):
                b = s.add(a, a)
            t = s.add(s.transpose(s.reshape(a, (32, 32)), (1, 0)), 1.0)
            want = np.arange(1024, dtype=np.float32).reshape(32, 32).T + 1
            assert np.array_equal(s.download_to_host(t).numpy(), want)
            assert np.array_equal(s.download_to_host(b).numpy(), 2 * np.arange(1024))
            assert _driver_fast.stream_query(s._ctx.stream) is True
            try:
                s.add(a, s.upload_host_tensor(np.ones(3, np.float32)))
            except tc.ValidationError:
                pass
            else:
                raise AssertionError("no error")
        print("ok")
    ''')
    env = dict(os.environ, TENFERRO_CUDA_DRIVER_BINDINGS="legacy")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_interop_round_trip_orders_streams(s):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA PyTorch")
    x = torch.arange(1 << 16, device="cuda", dtype=torch.float32)
    t = s.from_dlpack(x)
    back = torch.from_dlpack(s.add(t, t))
    torch.cuda.synchronize()
    assert torch.equal(back, 2 * x)


def test_pointer_ordinal_of_device_and_host_memory(s):
    x = up(s, np.arange(8, dtype=np.float32))
    assert _driver_fast.pointer_ordinal(x.data_ptr()) == s._ctx.ordinal
    host = np.zeros(16, np.uint8)
    with pytest.raises(BackendSourceError, match="cuPointerGetAttribute"):
        _driver_fast.pointer_ordinal(host.ctypes.data)
    with pytest.raises(tc.ValidationError, match="not CUDA device memory"):
        s.from_cuda_array_interface({"shape": (16,), "typestr": "|u1", "version": 3,
                                     "data": (host.ctypes.data, False), "strides": None})
