"""Several GPUs: NCCL all-reduce bus bandwidth and copies between devices, beside PyTorch.

Rows (skipped, with one printed line, on a host with fewer than two GPUs):

- ``all_reduce`` of 256 MiB float32 in place over every GPU (up to 8), bus bandwidth
  (``2 (n - 1) / n * bytes / time``, as nccl-tests reports it): ours with one process
  driving every GPU (``Communicator.from_sessions``), and ours with one process per GPU
  (``Communicator.from_unique_id``), each beside ``torch.distributed`` (NCCL backend) with
  one process per GPU, its only mode: a process group spans processes, not devices of
  one process. Target: ours >= 95 % of PyTorch's.
- a copy of 256 MiB from device 0 to device 1 and back, GB/s: ``copy_to`` (route
  ``auto``: peer access where the driver allows it) beside ``tensor.to("cuda:1")``; and
  ``copy_to(route="host")``, the staged fallback, for reference.

Times are wall clock over ``ITERS`` calls after ``WARMUP`` calls, every stream
synchronized before and after (the work spans several devices, so no single stream's
events can time it). NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``, and PyTorch's and
NVSHMEM's switches), here and in every process started from here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from .common import Row, gbps, peers

FAMILY = "multigpu"
NBYTES = 256 << 20
WARMUP, ITERS = 5, 20
MAX_GPUS = 8
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(NO_MULTICAST)  # before any communicator of this process exists
ROOT = Path(__file__).resolve().parents[2]

OURS_WORKER = """
import json, sys, time
import numpy as np
import tenferro_cuda as tc
rank, n, uid = int(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3])
warmup, iters, count = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
with tc.cuda_exec_session(rank) as s:
    with tc.Communicator.from_unique_id(s, uid, rank, n) as comm:
        x = s.full((count,), 1.0, tc.float32)
        for _ in range(warmup):
            comm.all_reduce_into(x, x)
        s.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            comm.all_reduce_into(x, x)
        s.synchronize()
        seconds = (time.perf_counter() - t0) / iters
print(json.dumps({"rank": rank, "seconds": seconds}))
"""

TORCH_WORKER = """
import json, os, sys, time
import torch
import torch.distributed as dist
rank, n = int(sys.argv[1]), int(sys.argv[2])
warmup, iters, count = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
torch.cuda.set_device(rank)
dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
x = torch.ones(count, dtype=torch.float32, device="cuda")
for _ in range(warmup):
    dist.all_reduce(x)
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(x)
torch.cuda.synchronize()
seconds = (time.perf_counter() - t0) / iters
dist.destroy_process_group()
print(json.dumps({"rank": rank, "seconds": seconds}))
"""


def _bus_gbps(n: int, seconds: float | None) -> float | None:
    if not seconds:
        return None
    return 2 * (n - 1) / n * NBYTES / seconds / 1e9


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _spawn(code: str, n: int, uid: str) -> float | None:
    """Run ``code`` in ``n`` processes (rank = argv[1]); rank 0's seconds per call."""
    env = dict(os.environ, **NO_MULTICAST, MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    args = [str(n), uid, str(WARMUP), str(ITERS), str(NBYTES // 4)]
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(r), *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for r in range(n)]
    results = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, results):
        if p.returncode:
            print(f"[{FAMILY}] a worker failed:\n{err[-2000:]}", flush=True)
            return None
    return max(json.loads(out.strip().splitlines()[-1])["seconds"] for out, _ in results)


def _wall(fn, sync) -> float:
    for _ in range(WARMUP):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(ITERS):
        fn()
    sync()
    return (time.perf_counter() - t0) / ITERS


def _all_reduce_rows(tc, sessions, torch) -> list[Row]:
    n = len(sessions)
    if not sessions[0].supports(tc.Capability.COLLECTIVES):
        print(f"[{FAMILY}] all_reduce skipped: NCCL is not installed "
              "(pip install 'tenferro-cuda[nccl]')", flush=True)
        return []
    with tc.Communicator.from_sessions(sessions) as comm:
        xs = [s.full((NBYTES // 4,), 1.0, tc.float32) for s in sessions]

        def sync() -> None:
            for s in sessions:
                s.synchronize()

        one = _wall(lambda: comm.all_reduce_into(xs, xs), sync)
    spread = _spawn(OURS_WORKER, n, tc.nccl_unique_id().hex())
    theirs = _spawn(TORCH_WORKER, n, "-") if torch is not None else None
    name = f"all_reduce 256 MiB float32 x{n} GPUs bus bandwidth"
    target = ">= 95% of torch.distributed"
    return [Row(FAMILY, name + " (one process)", "GB/s", _bus_gbps(n, one),
                torch=_bus_gbps(n, theirs), target=target,
                note="torch: one process per GPU (its only mode)"),
            Row(FAMILY, name + " (process per GPU)", "GB/s", _bus_gbps(n, spread) or 0.0,
                torch=_bus_gbps(n, theirs), target=target)]


def _copy_rows(tc, s0, s1, torch) -> list[Row]:
    rows = []
    for a, b, sa, sb in ((0, 1, s0, s1), (1, 0, s1, s0)):
        x = sa.full((NBYTES // 4,), 1.0, tc.float32)

        def sync(sa=sa, sb=sb) -> None:
            sa.synchronize()
            sb.synchronize()

        ours = _wall(lambda x=x, sa=sa, sb=sb: sa.copy_to(sb, x), sync)
        staged = _wall(lambda x=x, sa=sa, sb=sb: sa.copy_to(sb, x, route="host"), sync)
        theirs = None
        if torch is not None:
            t = torch.ones(NBYTES // 4, dtype=torch.float32, device=f"cuda:{a}")

            def tsync(a=a, b=b) -> None:
                torch.cuda.synchronize(a)
                torch.cuda.synchronize(b)

            theirs = _wall(lambda t=t, b=b: t.to(f"cuda:{b}"), tsync)
            del t
        peer = sa.supports(tc.Capability.PEER_COPY, peer=sb)
        rows.append(Row(FAMILY, f"copy_to 256 MiB device {a} -> {b}", "GB/s",
                        gbps(NBYTES, ours * 1e3) or 0.0,
                        torch=gbps(NBYTES, theirs * 1e3) if theirs else None,
                        note=f"peer access: {peer}; torch: tensor.to('cuda:{b}')"))
        rows.append(Row(FAMILY, f"copy_to 256 MiB device {a} -> {b}, staged (host)", "GB/s",
                        gbps(NBYTES, staged * 1e3) or 0.0, note="pinned host slots"))
    return rows


def run(s) -> list[Row]:
    import tenferro_cuda as tc
    from tenferro_cuda import _driver

    try:
        count = min(_driver.device_count(), MAX_GPUS)
    except tc.CudaDeviceError:
        count = 0
    if count < 2:
        print(f"[{FAMILY}] skipped: needs at least two GPUs ({count} present)", flush=True)
        return []
    torch, _ = peers()
    scopes = [tc.cuda_exec_session(k) for k in range(1, count)]
    sessions = [s] + [scope.__enter__() for scope in scopes]
    try:
        rows = _copy_rows(tc, sessions[0], sessions[1], torch)
        if torch is not None:
            torch.cuda.empty_cache()
        for other in sessions:
            other.release_cached_memory()
        rows += _all_reduce_rows(tc, sessions, torch)
    finally:
        for scope in reversed(scopes):
            scope.__exit__(None, None, None)
    return rows
