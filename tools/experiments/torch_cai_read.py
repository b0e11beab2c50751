"""The CUDA Array Interface import of a PyTorch tensor, in pieces: PyTorch's property, our
parse of it, ``producers.read_interface`` (the same fields from the tensor's getters), the
pointer query, and the whole import beside ``cupy.asarray`` (us per call, median of
5 x 5,000 calls, three rounds). Run from the repository root on a GPU host with PyTorch
and CuPy:

    python3 tools/experiments/torch_cai_read.py
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path[:0] = [os.getcwd()]

import cupy  # noqa: E402
import torch  # noqa: E402

import tenferro_cuda as tc  # noqa: E402
from tenferro_cuda.cai import parse_interface  # noqa: E402
from tenferro_cuda.ops import interop  # noqa: E402
from tenferro_cuda.ops.interop.producers import read_interface  # noqa: E402


def per_call(fn, sync, calls=5000) -> float:
    for _ in range(500):
        fn()
    sync()
    out = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def main() -> None:
    print(torch.__version__, cupy.__version__, flush=True)
    with tc.cuda_exec_session(0) as s:
        ctx = s._ctx

        def sync():
            s.synchronize()
            torch.cuda.synchronize()
            cupy.cuda.Device().synchronize()

        t = torch.arange(1 << 16, device="cuda:0", dtype=torch.float32).reshape(256, 256)
        sync()
        assert read_interface(t) == parse_interface(t.__cuda_array_interface__)
        cases = {
            "property": lambda: t.__cuda_array_interface__,
            "property+parse": lambda: parse_interface(t.__cuda_array_interface__),
            "read_interface": lambda: read_interface(t),
            "pointer query": lambda: interop._check_pointer(ctx, t.data_ptr(), "probe"),
            "session import": lambda: s.from_cuda_array_interface(t),
            "cupy.asarray": lambda: cupy.asarray(t),
        }
        for rnd in range(3):
            row = {name: per_call(fn, sync) for name, fn in cases.items()}
            print(f"round {rnd}: " + " ".join(f"{k}={v:.2f}" for k, v in row.items()),
                  flush=True)


if __name__ == "__main__":
    main()
