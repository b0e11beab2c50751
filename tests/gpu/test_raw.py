"""The raw extension session and the kernel session."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda import _driver
from tenferro_cuda.raw import KernelArg, LaunchConfig

ADD_SRC = r'''
extern "C" __global__ void add(const float* a, const float* b, float* c, long long n) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
'''
SPIN_SRC = r'''
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}
'''
PTX_SRC = r'''
.version 7.0
.target sm_80
.address_size 64
.visible .entry put7(.param .u64 p) {
  .reg .u64 %rd<2>;
  .reg .u32 %r<2>;
  ld.param.u64 %rd1, [p];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
'''


def test_nvrtc_add_round_trip(s, rng):
    a = rng.standard_normal(1000).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    ta, tb = up(s, a), up(s, b)

    def body(raw):
        out = raw.alloc_output(tc.float32, (1000,))
        fn = raw.compile_nvrtc(ADD_SRC).function("add")
        args = [KernelArg.pointer(raw.tensor(ta)), KernelArg.pointer(raw.tensor(tb)),
                KernelArg.pointer(raw.tensor_mut(out)), KernelArg.i64(1000)]
        raw.launch(fn, LaunchConfig(grid=4, block=256), args)
        return out

    out = s.with_raw("test.add", body)
    np.testing.assert_array_equal(down(s, out), a + b)


def test_ptx_load(s):
    with s.raw("test.ptx") as raw:
        out = raw.alloc_output(tc.int32, (1,))
        fn = raw.load_ptx(PTX_SRC).function("put7")
        raw.launch(fn, LaunchConfig(1, 1), [KernelArg.pointer(raw.tensor_mut(out))])
    assert down(s, out).tolist() == [7]


def test_with_raw_does_not_synchronize(s):
    with s.raw("test.spin") as raw:
        fn = raw.compile_nvrtc(SPIN_SRC).function("spin")
        raw.launch(fn, LaunchConfig(1, 1), [KernelArg.i64(2_000_000_000)])  # ~1 s
        stream = raw.stream().cu_stream()
    assert _driver.stream_query(stream) is False  # still running after with_raw returned
    s.synchronize()
    assert _driver.stream_query(stream) is True


@pytest.mark.parametrize("config", [
    dict(grid=1, block=2048), dict(grid=(1, 1, 1), block=(32, 32, 2)),
    dict(grid=(1, 70000, 1), block=1), dict(grid=1, block=32, shared_bytes=1 << 30)])
def test_bad_geometry_rejected_before_launch(s, config):
    with s.raw("test.geom") as raw:
        fn = raw.compile_nvrtc(SPIN_SRC).function("spin")
        with pytest.raises(tc.ValidationError):
            raw.launch(fn, LaunchConfig(**config), [KernelArg.i64(1)])
    s.synchronize()


def test_launch_config_validated():
    with pytest.raises(tc.ValidationError, match="block must be"):
        LaunchConfig(grid=1, block=(0, 1, 1))


def test_garbage_cubin_and_bad_source(s):
    with s.raw("test.bad") as raw:
        with pytest.raises(tc.BackendSourceError) as info:
            raw.load_cubin(b"\x7fELF garbage" * 10)
        assert "cuModuleLoadData" in str(info.value)
        with pytest.raises(tc.CompileError) as info:
            raw.compile_nvrtc("__global__ void k() { this is not C++ }", name="bad.cu")
        assert info.value.log and "bad.cu" in str(info.value)
        assert info.value.source_name == "bad.cu"
    s.synchronize()


def test_resource_cache(s):
    calls = []
    with s.raw("test.res") as raw:
        assert raw.resource("k", lambda: calls.append(1) or 5) == 5
        assert raw.resource("k", lambda: calls.append(1) or 6) == 5
    assert calls == [1]


def test_kernel_session_zero_scale_and_flush(s):
    with s.kernels("test.kernels") as ks:
        z = ks.alloc_zero_output(tc.float64, (3, 5))
        x = up(s, np.arange(6, dtype=np.complex64).reshape(2, 3))
        ks.scale_tensor_write(x, 2 - 1j)
        ks.scale_tensor_write(x[:, ::2], 10)
        assert ks.grid_1d(1000).grid == (4, 1, 1)
        fill = ks.function("copy", "fill", "tf::u32")
        assert fill.name == "tf::fill<tf::u32>"
    assert np.array_equal(down(s, z), np.zeros((3, 5)))
    ref = np.arange(6, dtype=np.complex64).reshape(2, 3) * (2 - 1j)
    ref[:, ::2] *= 10
    np.testing.assert_allclose(down(s, x), ref, rtol=1e-6)
    flushed = []
    s._ctx.pending.append(lambda: flushed.append("x"))
    with pytest.raises(RuntimeError, match="inside"):
        with s.kernels("test.kernels_err"):
            assert flushed == ["x"]  # flushed on entry
            s._ctx.pending.append(lambda: flushed.append("y"))
            raise RuntimeError("inside")
    assert flushed == ["x", "y"]  # and on exit after the error


def test_second_process_uses_disk_cache(s, tmp_path):
    code = textwrap.dedent("""
        import numpy as np, tenferro_cuda as tc
        from tenferro_cuda.kernels import compiler
        with tc.cuda_exec_session(0) as s:
            x = s.upload_host_tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
            y = s.download_to_host(x.T).numpy()
            with s.kernels("p") as ks:
                ks.scale_tensor_write(x, 2.0)
                ks.alloc_zero_output(tc.int32, (5,))
            s.synchronize()
        print("COMPILES", compiler.compile_count["n"])
    """)
    env = dict(os.environ, TENFERRO_CUDA_CACHE_DIR=str(tmp_path))
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "COMPILES 0" not in first.stdout
    assert "COMPILES 0" in second.stdout


SHARED_SRC = r'''
extern "C" __global__ void reverse_in_shared(const float* x, float* y, int n) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = x[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = buf[n - 1 - i];
}
extern "C" __global__ void __launch_bounds__(128) bounded(float* y) {
  y[threadIdx.x] = 1.0f;
}
'''


def test_dynamic_shared_memory_above_48k_and_the_kernels_own_block_limit(s):
    n = 24 * 1024  # 96 KiB of floats: above the default 48 KiB, within the opt-in limit
    x = np.arange(n, dtype=np.float32)
    tx, ty = up(s, x), up(s, np.zeros(n, np.float32))

    def body(raw):
        module = raw.compile_nvrtc(SHARED_SRC)
        raw.launch(module.function("reverse_in_shared"), LaunchConfig(1, 256, n * 4),
                   [KernelArg.pointer(raw.tensor(tx)), KernelArg.pointer(raw.tensor_mut(ty)),
                    KernelArg.i32(n)])
        with pytest.raises(tc.ValidationError, match="at most 128"):
            raw.launch(module.function("bounded"), LaunchConfig(1, 256),
                       [KernelArg.pointer(raw.tensor_mut(ty))])
        with pytest.raises(tc.ValidationError):
            raw.launch(module.function("reverse_in_shared"),
                       LaunchConfig(1, 256, s.device_info().max_shared_per_block + 4),
                       [KernelArg.pointer(raw.tensor(tx)),
                        KernelArg.pointer(raw.tensor_mut(ty)), KernelArg.i32(n)])

    s.with_raw("test.shared", body)
    np.testing.assert_array_equal(down(s, ty), x[::-1])
