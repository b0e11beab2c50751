"""Foundation figures: launch host cost, pool alloc/free, first-call latency cold and
warm, tiny round trip, device copy bandwidth (the reference for every GB/s figure)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

import tenferro_cuda as tc
from tenferro_cuda import _driver, _driver_memory
from tenferro_cuda.raw import KernelArg, LaunchConfig

from .common import Row, bare_launch, gbps, host_us, peers, session_ms

FAMILY = "foundation"


def copy_bandwidth(s) -> float:
    n = 1 << 28  # 1 GiB of float32
    a = s.upload_host_tensor(np.zeros(1, np.float32))
    with s.kernels("bench.copy") as ks:
        a = ks.alloc_zero_output(tc.float32, (n,))
        b = ks.alloc_output(tc.float32, (n,))
    stream = _driver.stream_handle(s.stream_handle)
    ms = session_ms(s, lambda: _driver_memory.memcpy_dtod_async(b.data_ptr(), a.data_ptr(), 4 * n,
                                                         stream), iters=20)
    return gbps(8 * n, ms)


def launch_costs(s) -> list[Row]:
    rows = []
    with s.kernels("bench.launch") as ks:
        out = ks.alloc_output(tc.float32, (1,))
        fill = ks.function("copy", "fill", "tf::u32")
        cfg = LaunchConfig(1, 32)
        args = [KernelArg.pointer(out.data_ptr()), KernelArg.raw(b"\0\0\0\0"), KernelArg.i64(1)]
        sync = s.synchronize
        rows.append(Row(FAMILY, "kernel session launch (pre-built args)", "us",
                        host_us(lambda: ks.launch(fill, cfg, args), sync),
                        target="report; bare cuLaunchKernel 5.2 us"))
    rows.append(Row(FAMILY, "bare cuLaunchKernel, pre-packed", "us",
                    host_us(bare_launch(s), sync)))
    stream = s._ctx.stream
    pool = s._rt.pool
    rows.append(Row(FAMILY, "pool alloc+free pair (4 KiB)", "us",
                    host_us(lambda: pool.alloc(4096, stream).release(), sync)))
    rows.append(round_trip_row(s))
    return rows


def round_trip_row(s) -> Row:
    """``download_to_host(upload_host_tensor(...))`` of one float32 (both through the
    context's pinned word) beside ``torch.tensor(x, device='cuda').cpu()``, same array."""
    x = np.ones(1, np.float32)
    ours = host_us(lambda: s.download_to_host(s.upload_host_tensor(x)), s.synchronize,
                   calls=2000)
    peer = None
    torch, _ = peers()
    if torch is not None:
        peer = host_us(lambda: torch.tensor(x, device="cuda").cpu(), torch.cuda.synchronize,
                       calls=2000)
    return Row(FAMILY, "upload+download of 4 bytes", "us", ours, torch=peer,
               target="<= torch.tensor(x, device='cuda').cpu()",
               note="4 bytes each way through the pinned word; one stream synchronize")


def first_call_latency() -> list[Row]:
    code = textwrap.dedent("""
        import time, numpy as np
        t0 = time.perf_counter()
        import tenferro_cuda as tc
        with tc.cuda_exec_session(0) as s:
            x = s.upload_host_tensor(np.ones(1000, np.float32))
            s.synchronize()
            t1 = time.perf_counter()
            with s.kernels("first") as ks:
                ks.scale_tensor_write(x, 2.0)
            s.synchronize()
            t2 = time.perf_counter()
        print("FIRST_MS", 1e3 * (t2 - t1))
    """)
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TENFERRO_CUDA_CACHE_DIR=cache)
        for label in ("cold (empty cache)", "warm (new process, disk cache)"):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, check=True)
            ms = float(re.search(r"FIRST_MS\D*([0-9.]+)", res.stdout).group(1))
            rows.append(Row(FAMILY, f"first call of a kernel, {label}", "ms", ms))
    return rows


def run(s) -> list[Row]:
    t0 = time.perf_counter()
    rows = [Row(FAMILY, "device copy bandwidth (DtoD, read+write)", "GB/s", copy_bandwidth(s))]
    rows += launch_costs(s)
    rows += first_call_latency()
    rows[-1].extra["seconds"] = time.perf_counter() - t0
    return rows
