"""Timing helpers shared by the benchmark cases.

All device timings are CUDA-event medians after warm-up, on the stream the work runs on:
each sample times ``iters`` back-to-back calls between two events (so the host cost of
issuing a call overlaps the previous call's device work, as in real use, for every peer
alike), and the figure is the median over ``REPS`` samples of the time per call.
A case returns ``Row``s; ``tools/bench.py`` prints them beside the peers and writes
``bench/results.json``.
"""

from __future__ import annotations

import statistics
import time
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field

from tenferro_cuda import _driver
from tenferro_cuda.dtypes import DType
from tenferro_cuda.kernels.args import ArgPack


@dataclass
class Row:
    """One benchmark figure. ``unit`` is GB/s, TFLOP/s or us; higher is better except us."""

    family: str
    name: str
    unit: str
    ours: float
    torch: float | None = None
    cupy: float | None = None
    target: str = ""
    note: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


REPS = 5


def event_median_ms(stream, fn, warmup: int = 3, iters: int = 10) -> float:
    """Median device time per call of ``fn()`` enqueued on ``stream`` (a CUstream), in ms."""
    for _ in range(warmup):
        fn()
    _driver.stream_synchronize(stream)
    start, end = _driver.event_create(True), _driver.event_create(True)
    times = []
    try:
        for _ in range(REPS):
            _driver.event_record(start, stream)
            for _ in range(iters):
                fn()
            _driver.event_record(end, stream)
            _driver.event_synchronize(end)
            times.append(_driver.event_elapsed_ms(start, end) / iters)
    finally:
        _driver.event_destroy(start)
        _driver.event_destroy(end)
    return statistics.median(times)


def session_ms(session, fn, warmup: int = 3, iters: int = 10) -> float:
    """Median device time of ``fn()`` on the session stream."""
    stream = _driver.stream_handle(session.stream_handle)
    return event_median_ms(stream, fn, warmup, iters)


def torch_ms(fn, warmup: int = 3, iters: int = 10) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / iters)
    return statistics.median(times)


def cupy_ms(fn, warmup: int = 3, iters: int = 10) -> float | None:
    try:
        import cupy
    except ImportError:
        return None
    for _ in range(warmup):
        fn()
    cupy.cuda.Device().synchronize()
    times = []
    for _ in range(REPS):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b) / iters)
    return statistics.median(times)


def host_us(fn, sync, calls: int = 20000, repeats: int = 5) -> float:
    """Host cost per call: ``calls`` calls then ``sync()``, median over repeats, in us."""
    for _ in range(min(calls, 1000)):
        fn()
    sync()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def host_us_group(fns: dict, calls: int = 20000, repeats: int = 7) -> dict:
    """``host_us`` of several ``(fn, sync)`` or ``(fn, sync, scope)`` entries (None:
    skipped), interleaved: each repeat times every entry once, in an order rotated by one
    per repeat, so that all of them see the same host conditions (clock, other load) and
    their differences mean something. ``scope()`` gives a context manager entered around
    each batch of calls (a consumer's current stream, say), outside the timing. The median
    per name, in us."""
    live = {name: (entry[0], entry[1], entry[2] if len(entry) > 2 else nullcontext)
            for name, entry in fns.items() if entry is not None}
    for fn, sync, scope in live.values():
        with scope():
            for _ in range(min(calls, 1000)):
                fn()
            sync()
    samples: dict = {name: [] for name in live}
    names = list(live)
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn, sync, scope = live[name]
            with scope():
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                sync()
                samples[name].append((time.perf_counter() - t0) / calls * 1e6)
    return {name: statistics.median(samples[name]) if name in samples else None
            for name in fns}


def gbps(nbytes: int, ms: float | None) -> float | None:
    return None if ms is None or ms <= 0 else nbytes / (ms * 1e-3) / 1e9


def peers():
    """(torch, cupy) modules when importable with a CUDA device, else None for each."""
    try:
        import torch

        torch = torch if torch.cuda.is_available() else None
    except ImportError:
        torch = None
    try:
        import cupy
    except ImportError:
        cupy = None
    return torch, cupy


def release_peer_memory(torch, cupy) -> None:
    """Hand the peers' cached device memory back between cases."""
    if torch is not None:
        torch.cuda.empty_cache()
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()


def case_rows(s, torch, cupy, row, cases) -> list[Row]:
    """``row(s, torch, cupy, *case)`` for each case, every case's tensors freed before
    the next (they die on return; the peers' caches are emptied)."""
    rows = []
    for case in cases:
        rows.append(row(s, torch, cupy, *case))
        s.synchronize()
        release_peer_memory(torch, cupy)
    return rows


def bare_launch(s, v2: bool = False):
    """A bare ``cuLaunchKernel`` of a 1-block fill with pre-packed arguments on the session
    stream (the floor of any launch from Python): through ``cuda.bindings.driver`` with
    its handle objects, or with ``v2`` through ``cuda.bindings._v2.driver`` with integer
    handles (None when that module is not installed)."""
    from cuda.bindings import driver as d

    if v2:
        try:
            from cuda.bindings._v2 import driver as d2
        except ImportError:
            return None
    with s.kernels("bench.bare") as ks:
        out = ks.alloc_output(DType.FLOAT32, (1,))
    fn = s._rt.function("copy", "tf::fill<tf::u32>")
    pack = ArgPack("PS4q")  # owns the argument block that ``params`` points into
    params = pack.pack(out.data_ptr(), b"\0\0\0\0", 1)
    stream, launch = s._ctx.stream, d.cuLaunchKernel
    if v2:
        fn, stream, launch = int(fn), int(stream), d2.launch_kernel

    def bare(keep=(pack, out)):  # the block and the output live as long as the closure
        launch(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)

    return bare
