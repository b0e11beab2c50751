"""What the export's kit saves, beside the peers, in one process (run on a GPU host from
the repository root: ``python3 tools/experiments/export_kit.py``).

Each consumer's current stream is ours, as in the bench's "current stream ours" rows.
``kit``: our tensor, exported again and again (the kit answers). ``full``: the same
tensor with its kit dropped before each call, so that every export takes the full path
(what every export took before the kit; the drop and the mark cost a store each). Both
go through the same one-frame wrapper, so they compare like with like; ``ours`` is the
tensor itself. The peers: ``torch.from_dlpack(cupy array)`` and ``cupy.from_dlpack(cupy
array)`` on the default stream. Per call in us, median of 5 rounds of 5,000 calls, the
rounds interleaved.

The ``default`` rows: the consumer on its default stream, so that our export orders
(an event each way and the release callback), beside the peer that orders too: CuPy's
array made on a non-blocking side stream, current while PyTorch takes it, as in the
bench's "beside an ordering peer" row.
"""

import contextlib
import os
import statistics
import sys
import time

sys.path[:0] = [os.getcwd()]
import cupy  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import tenferro_cuda as tc  # noqa: E402
from tenferro_cuda import _dlpack_export as E  # noqa: E402


class Wrapped:
    """Our tensor behind one frame; ``full`` drops its kit before each export."""

    __slots__ = ("t", "full")

    def __init__(self, t, full: bool) -> None:
        self.t, self.full = t, full

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.full:
            self.t._kit = None
        return E.export_capsule(self.t, stream=stream, max_version=max_version,
                                dl_device=dl_device, copy=copy)


def rounds(fns: dict, sync, calls=5000, repeats=5) -> dict:
    """``fns``: name -> (function, a context manager factory its calls run in)."""
    for fn, scope in fns.values():
        with scope():
            for _ in range(500):
                fn()
    sync()
    times: dict = {k: [] for k in fns}
    for _ in range(repeats):
        for k, (fn, scope) in fns.items():
            with scope():
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                sync()
                times[k].append((time.perf_counter() - t0) / calls * 1e6)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    print(torch.__version__, cupy.__version__, flush=True)
    with tc.cuda_exec_session(0) as s:
        def sync():
            s.synchronize()
            torch.cuda.synchronize()
            cupy.cuda.Device().synchronize()

        n = 1 << 16
        ours = s.upload_host_tensor(np.arange(n, dtype="float32").reshape(256, 256))
        kit, full = Wrapped(ours, False), Wrapped(ours, True)
        c = cupy.arange(n, dtype=cupy.float32).reshape(256, 256)
        own = int(s.stream)
        torch_ours = torch.cuda.ExternalStream(own)
        cupy_ours = cupy.cuda.Stream.from_external(s.stream)

        def on_torch():
            return torch.cuda.stream(torch_ours)

        def on_cupy():
            return cupy_ours

        side = cupy.cuda.Stream(non_blocking=True)
        with side:
            c_side = cupy.arange(n, dtype=cupy.float32).reshape(256, 256)

        fns = {
            "our __dlpack__, kit": (lambda: ours.__dlpack__(stream=own, max_version=(1, 0)),
                                    contextlib.nullcontext),
            "peer torch.from_dlpack(cupy)": (lambda: torch.from_dlpack(c),
                                             contextlib.nullcontext),
            "torch.from_dlpack(ours)": (lambda: torch.from_dlpack(ours), on_torch),
            "torch.from_dlpack(wrapped kit)": (lambda: torch.from_dlpack(kit), on_torch),
            "torch.from_dlpack(wrapped full)": (lambda: torch.from_dlpack(full), on_torch),
            "peer cupy.from_dlpack(cupy)": (lambda: cupy.from_dlpack(c),
                                            contextlib.nullcontext),
            "cupy.from_dlpack(ours)": (lambda: cupy.from_dlpack(ours), on_cupy),
            "cupy.from_dlpack(wrapped kit)": (lambda: cupy.from_dlpack(kit), on_cupy),
            "cupy.from_dlpack(wrapped full)": (lambda: cupy.from_dlpack(full), on_cupy),
            "default: peer torch.from_dlpack(cupy on a side stream)": (
                lambda: torch.from_dlpack(c_side), lambda: side),
            "default: torch.from_dlpack(ours)": (lambda: torch.from_dlpack(ours),
                                                 contextlib.nullcontext),
            "default: torch.from_dlpack(wrapped full)": (lambda: torch.from_dlpack(full),
                                                         contextlib.nullcontext),
        }
        results = []
        for r in range(3):
            results.append(rounds(fns, sync))
            print(f"round {r + 1} done", flush=True)
        print("| path | " + " | ".join(f"r{i + 1}" for i in range(len(results))) + " |")
        print("| --- |" + " --- |" * len(results))
        for k in fns:
            print(f"| {k} | " + " | ".join(f"{g[k]:.2f}" for g in results) + " |")
        for peer, keys in (("peer torch.from_dlpack(cupy)",
                            ("torch.from_dlpack(ours)", "torch.from_dlpack(wrapped kit)",
                             "torch.from_dlpack(wrapped full)")),
                           ("peer cupy.from_dlpack(cupy)",
                            ("cupy.from_dlpack(ours)", "cupy.from_dlpack(wrapped kit)",
                             "cupy.from_dlpack(wrapped full)")),
                           ("default: peer torch.from_dlpack(cupy on a side stream)",
                            ("default: torch.from_dlpack(ours)",
                             "default: torch.from_dlpack(wrapped full)"))):
            print(f"times {peer}: " + "; ".join(
                f"{k} " + "/".join(f"{g[k] / g[peer]:.2f}" for g in results) for k in keys))


if __name__ == "__main__":
    main()
