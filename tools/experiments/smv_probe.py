"""cuda.core's StridedMemoryView against our readers, for a PyTorch tensor (docs/interop.md,
"cuda.core's StridedMemoryView against our parser"). Run on a GPU machine with PyTorch and
cuda-core installed: ``python3 tools/experiments/smv_probe.py``. Per call in us, the median
of 5 runs of 5,000 calls, two rounds."""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())

import numpy as np  # noqa: E402
import torch  # noqa: E402
from cuda.core.utils import StridedMemoryView  # noqa: E402

import tenferro_cuda as tc  # noqa: E402
from tenferro_cuda import _driver_fast, cai  # noqa: E402
from tenferro_cuda.dlpack import read_capsule  # noqa: E402


def per_call(fn, calls: int = 5000) -> float:
    for _ in range(500):
        fn()
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - start) / calls * 1e6)
    torch.cuda.synchronize()
    return statistics.median(runs)


def main() -> None:
    with tc.cuda_exec_session(0) as s:
        t = torch.arange(1 << 16, device="cuda:0", dtype=torch.float32).reshape(256, 256)
        host = np.arange(16, dtype=np.float32)

        class HostDict:
            __cuda_array_interface__ = {"shape": (16,), "typestr": "<f4", "version": 3,
                                        "data": (host.ctypes.data, False), "strides": None}

        try:
            StridedMemoryView.from_cuda_array_interface(HostDict(), -1)
            print("a host pointer is accepted")
        except Exception as exc:  # noqa: BLE001 - what it raises is the finding
            print(f"a host pointer raises {type(exc).__name__}: {exc}")

        def ours_cai() -> None:
            info = cai.parse_interface(t.__cuda_array_interface__)
            _driver_fast.pointer_ordinal(info.data)

        def smv_cai() -> tuple:
            v = StridedMemoryView.from_cuda_array_interface(t, -1)
            return v.ptr, v.shape, v.strides, v.dtype, v.readonly, v.device_id

        def smv_cai_pointer() -> tuple:
            v = StridedMemoryView.from_cuda_array_interface(t, -1)
            return v.ptr, v.device_id

        def ours_dlpack() -> None:
            read_capsule(t.__dlpack__(stream=-1, max_version=(1, 1)), "probe")

        def smv_dlpack() -> tuple:
            v = StridedMemoryView.from_dlpack(t, -1)
            return v.ptr, v.shape, v.strides, v.dtype, v.readonly, v.device_id

        rows = {
            "PyTorch's CAI property": lambda: t.__cuda_array_interface__,
            "ours: property, parse, pointer query": ours_cai,
            "StridedMemoryView CAI, every field": smv_cai,
            "StridedMemoryView CAI, pointer and device": smv_cai_pointer,
            "session.from_cuda_array_interface": lambda: s.from_cuda_array_interface(t),
            "PyTorch __dlpack__(-1), dropped": lambda: t.__dlpack__(stream=-1,
                                                                    max_version=(1, 1)),
            "ours: __dlpack__(-1), read_capsule": ours_dlpack,
            "StridedMemoryView DLPack, every field": smv_dlpack,
        }
        for round_ in range(2):
            cells = "; ".join(f"{name} {per_call(fn):.2f}" for name, fn in rows.items())
            print(f"round {round_}: {cells}", flush=True)


if __name__ == "__main__":
    main()
