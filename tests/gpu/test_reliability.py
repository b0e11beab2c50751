"""Faults, fork, the host-sync debug switch, and threads (foundation level)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda.debug import forbid_host_sync


def run_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))


def test_out_of_bounds_write_loses_context_for_good():
    res = run_child("""
        import numpy as np, tenferro_cuda as tc
        SRC = r'''extern "C" __global__ void bad(int* p) {
            p[threadIdx.x * 1099511627776LL] = 1; }'''
        with tc.cuda_exec_session(0) as s:
            x = s.upload_host_tensor(np.zeros(4, np.int32))
            def body(raw):
                fn = raw.compile_nvrtc(SRC).function("bad")
                raw.launch(fn, tc.LaunchConfig(1, 32), [tc.KernelArg.pointer(raw.tensor(x))])
            s.with_raw("fault.oob", body)
            print("ENQUEUED")
            try:
                s.synchronize()
            except tc.ContextLostError as exc:
                print("FIRST", exc)
            for attempt in range(3):
                try:
                    s.upload_host_tensor(np.ones(2))
                except tc.ContextLostError as exc:
                    print("AGAIN", exc)
        try:
            with tc.cuda_exec_session(0):
                pass
        except tc.ContextLostError as exc:
            print("NEW SESSION", exc)
    """)
    out = res.stdout
    print(out, res.stderr[-2000:])
    assert "ENQUEUED" in out
    assert "FIRST" in out and "device context is lost and the process must restart" in out
    assert out.count("AGAIN") == 3 and "NEW SESSION" in out


def test_fork_child_gets_clear_error():
    res = run_child("""
        import os, numpy as np, tenferro_cuda as tc
        with tc.cuda_exec_session(0) as s:
            x = s.upload_host_tensor(np.ones(3))
            s.synchronize()
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    s.download_to_host(x)
                except tc.RuntimeStateError as exc:
                    print("CHILD-OLD", exc, flush=True)
                    code += 1
                try:
                    with tc.cuda_exec_session(0):
                        pass
                except tc.RuntimeStateError as exc:
                    print("CHILD-NEW", exc, flush=True)
                    code += 1
                os._exit(0 if code == 2 else 3)
            _, status = os.waitpid(pid, 0)
            print("CHILD-STATUS", os.waitstatus_to_exitcode(status))
            print("PARENT", s.download_to_host(x).numpy().tolist())
    """)
    out = res.stdout
    assert "CHILD-OLD" in out and "fork" in out
    assert "CHILD-NEW" in out and "CHILD-STATUS 0" in out
    assert "PARENT [1.0, 1.0, 1.0]" in out, res.stderr


def test_forbid_host_sync_lets_ops_run_and_catches_blocking(s):
    x = up(s, np.arange(8, dtype=np.float32))
    with forbid_host_sync():
        with s.kernels("debug.scale") as ks:
            ks.scale_tensor_write(x, 2.0)
        y = s.download_to_host(x)  # an explicit barrier stays allowed
        s.synchronize()
        from tenferro_cuda import _driver

        with pytest.raises(tc.RuntimeStateError, match="host synchronization"):
            _driver.stream_synchronize(s._ctx.stream, "sneaky_op")
    assert y.numpy().tolist() == list(np.arange(8, dtype=np.float32) * 2)


def test_threads_each_with_their_own_session():
    errors, results = [], {}

    def work(i):
        try:
            with tc.cuda_exec_session(0) as s:
                a = np.full(100_000, i, np.float32)
                for _ in range(20):
                    x = up(s, a)
                    with s.kernels("thread.scale") as ks:
                        ks.scale_tensor_write(x, 3.0)
                    results[i] = float(down(s, x).sum())
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == {i: 300_000.0 * i for i in range(8)}


def test_tensor_of_another_thread_rejected(s):
    box = {}

    def other():
        with tc.cuda_exec_session(0) as s2:
            box["t"] = up(s2, np.ones(3))
            s2.synchronize()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    with pytest.raises(tc.RuntimeStateError, match="another thread"):
        s.download_to_host(box["t"])


def _device_count() -> int:
    from tenferro_cuda import _driver

    try:
        return _driver.device_count()
    except tc.CudaDeviceError:
        return 0


@pytest.mark.skipif(_device_count() < 2, reason="needs two GPUs (see README: several GPUs)")
def test_copy_to_other_device_and_rejection(rng):
    a = rng.standard_normal((64, 33)).astype(np.float32)
    with tc.cuda_exec_session(0) as s0, tc.cuda_exec_session(1) as s1:
        x0 = up(s0, a)
        x1 = s0.copy_to(s1, x0.T)
        assert np.array_equal(down(s1, x1), a.T)
        assert s0.copy_to(s0, x0).shape == a.shape
        with pytest.raises(tc.RuntimeStateError, match="on device 1"):
            s0.download_to_host(x1)
        assert s0.supports(tc.Capability.PEER_COPY) == s1.supports(tc.Capability.PEER_COPY)


def test_copy_to_same_device(s, rng):
    a = rng.standard_normal((5, 7))
    x = up(s, a)
    y = s.copy_to(s, x[:, ::2])
    assert np.array_equal(down(s, y), a[:, ::2])
