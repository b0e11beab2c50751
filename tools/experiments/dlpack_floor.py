"""How low a Python DLPack producer and a Python CAI consumer can go, beside the peers in
the same process (us per call, median of 5 x 5,000 calls, three rounds; the first round
is a warm-up). Run from the repository root on a GPU host with PyTorch and CuPy:

    python3 tools/experiments/dlpack_floor.py

- ``floor``: a Python class whose ``__dlpack__`` does only what a producer must: take a
  pre-packed versioned block (over our tensor's memory) from a ring, restore the word its
  deleter (``sigemptyset``) clears, and make the capsule with ``PyCapsule_New`` through
  ctypes; its ``__dlpack_device__`` returns a constant.
- ``pywrap``: a Python class that hands back CuPy's own capsule: the cost of the Python
  calls alone.
- ``cai floor``: PyTorch's interface property, the four entries an import reads, one
  pointer query and two bare objects.
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time
from collections import deque

sys.path[:0] = [os.getcwd()]

import cupy  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import tenferro_cuda as tc  # noqa: E402
from tenferro_cuda import _dlpack_slots as slots  # noqa: E402
from tenferro_cuda import _driver_fast  # noqa: E402
from tenferro_cuda.dlpack import _capsule_new  # noqa: E402
from tenferro_cuda.memory import DeviceBuffer  # noqa: E402
from tenferro_cuda.tensor import Tensor  # noqa: E402

N = 1 << 16
DEVICE = (2, 0)


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


def ring_over(ptr: int) -> deque:
    """4,096 pre-packed versioned blocks of a 256 x 256 float32 tensor at ``ptr``."""
    block, head = slots.layout(2, True)
    ring: deque = deque()
    for _ in range(4096):
        chunk = bytearray(256)
        addr = ctypes.addressof((ctypes.c_char * 256).from_buffer(chunk))
        shape_p = addr + head
        block.pack_into(chunk, 0, 1, 0, 0, slots.CLEAR, 0, ptr, 2, 0, 2, 2, 32, 1, shape_p,
                        shape_p + 16, 0, 256, 256, 256, 1)
        ring.append((chunk, addr, memoryview(chunk).cast("Q")))
    return ring


def main() -> None:
    print(torch.__version__, cupy.__version__, flush=True)
    with tc.cuda_exec_session(0) as s:
        def sync() -> None:
            s.synchronize()
            torch.cuda.synchronize()
            cupy.cuda.Device().synchronize()

        ours = s.upload_host_tensor(np.arange(N, dtype="float32").reshape(256, 256))
        c = cupy.arange(N, dtype=cupy.float32).reshape(256, 256)
        tt = torch.arange(N, device="cuda:0", dtype=torch.float32)
        ring = ring_over(ours.data_ptr())
        word0 = ring[0][2][0]
        name = slots._NAMES[1]

        class Floor:
            __slots__ = ()

            def __dlpack_device__(self):
                return DEVICE

            def __dlpack__(self, *, stream=None, max_version=None, dl_device=None,
                           copy=None):
                slot = ring.popleft()
                ring.append(slot)
                slot[2][0] = word0
                return _capsule_new(slot[1], name, None)

        class PyWrap:
            __slots__ = ()

            def __dlpack_device__(self):
                return DEVICE

            def __dlpack__(self, *, stream=None, max_version=None, dl_device=None,
                           copy=None):
                return c.__dlpack__(stream=-1)

        floor, wrap = Floor(), PyWrap()
        ext = torch.cuda.ExternalStream(int(s.stream))
        default = torch.cuda.current_stream()
        query = _driver_fast.pointer_ordinal
        new = object.__new__

        def cai_floor():
            d = tt.__cuda_array_interface__
            shape = d["shape"]
            d["typestr"]
            p = d["data"][0]
            d.get("strides")
            query(p)
            b = new(DeviceBuffer)
            b.home, b.ptr = None, p
            t = new(Tensor)
            t.shape, t.buffer = shape, b
            return t

        for rnd in range(3):
            r = {"floor dl": per_call(lambda: floor.__dlpack__(stream=-1), sync),
                 "ours dl(-1)": per_call(
                     lambda: ours.__dlpack__(stream=-1, max_version=(1, 0)), sync),
                 "cupy dl(-1)": per_call(lambda: c.__dlpack__(stream=-1), sync),
                 "torch<-cupy": per_call(lambda: torch.from_dlpack(c), sync),
                 "torch<-floor": per_call(lambda: torch.from_dlpack(floor), sync),
                 "torch<-pywrap": per_call(lambda: torch.from_dlpack(wrap), sync)}
            torch.cuda.set_stream(ext)
            r["torch<-ours(own)"] = per_call(lambda: torch.from_dlpack(ours), sync)
            torch.cuda.set_stream(default)
            r["cupy<-cupy"] = per_call(lambda: cupy.from_dlpack(c), sync)
            r["cupy<-floor"] = per_call(lambda: cupy.from_dlpack(floor), sync)
            r["cupy<-pywrap"] = per_call(lambda: cupy.from_dlpack(wrap), sync)
            cupy.cuda.ExternalStream(int(s.stream)).use()
            r["cupy<-ours(own)"] = per_call(lambda: cupy.from_dlpack(ours), sync)
            cupy.cuda.Stream.null.use()
            r["torch CAI property"] = per_call(lambda: tt.__cuda_array_interface__, sync)
            r["cai floor"] = per_call(cai_floor, sync)
            r["ours CAI(tt)"] = per_call(lambda: s.from_cuda_array_interface(tt), sync)
            r["cupy.asarray(tt)"] = per_call(lambda: cupy.asarray(tt), sync)
            print(f"round {rnd}: " + " ".join(f"{k}={v:.2f}" for k, v in r.items()))
            for consumer, peer in (("torch", "torch<-cupy"), ("cupy", "cupy<-cupy")):
                ratios = " ".join(f"{kind} {r[f'{consumer}<-{kind}'] / r[peer]:.2f}"
                                  for kind in ("ours(own)", "floor", "pywrap"))
                print(f"  {consumer}, times the peer: {ratios}", flush=True)


if __name__ == "__main__":
    main()
