"""100,000 import/export cycles with PyTorch leave nothing behind: no growth of our pool,
PyTorch's allocator or the process, no capsule waiting for its deleter, no parked
release, no capsule block made and no event made after the first cycles (the ordering
events are pooled; the blocks are reused slots)."""

from __future__ import annotations

import gc
import time

import numpy as np
import pytest
from gpu_util import up

from tenferro_cuda import _dlpack_slots, _foreign
from tenferro_cuda._dlpack_export import live_exports

CYCLES = 100_000


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _settle(s, torch) -> None:
    s.synchronize()
    torch.cuda.synchronize()
    gc.collect()
    _foreign.drain()


def test_cycles_leave_nothing_behind(s):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    x = torch.arange(4096, dtype=torch.float32, device="cuda:0")
    t = up(s, np.arange(4096, dtype=np.float32))
    stream = s.stream
    own = int(stream)

    def cycle() -> None:
        a = s.from_dlpack(x)  # import (stream=1 to PyTorch, one pooled event for us)
        b = torch.from_dlpack(t)  # export (PyTorch passes stream=1: one pooled event)
        c = s.from_cuda_array_interface(x)  # the CAI
        d = s.from_dlpack(x, stream=stream)  # named stream: no event anywhere
        e = torch.from_dlpack(t.__dlpack__(stream=own, max_version=(1, 0)))  # sigemptyset
        del a, b, c, d, e

    for _ in range(2000):
        cycle()
    _settle(s, torch)
    before = (_rss_bytes(), torch.cuda.memory_allocated(), s.memory_stats()["live_bytes"],
              _foreign.events_created(), live_exports())
    chunks = len(_dlpack_slots._chunks)
    start = time.perf_counter()
    for _ in range(CYCLES):
        cycle()
    elapsed = time.perf_counter() - start
    _settle(s, torch)
    rss, torch_bytes, ours, events, exports = (
        _rss_bytes(), torch.cuda.memory_allocated(), s.memory_stats()["live_bytes"],
        _foreign.events_created(), live_exports())
    assert exports == before[4] == 0 and _foreign.parked_count() == 0
    assert len(_dlpack_slots._chunks) == chunks, "capsule blocks grew in steady state"
    assert events == before[3], f"{events - before[3]} events made in steady state"
    assert torch_bytes == before[1] and ours == before[2]
    assert rss - before[0] < 32 << 20, f"the process grew by {(rss - before[0]) >> 20} MiB"
    assert elapsed < 60, f"{CYCLES} cycles took {elapsed:.1f} s"
    print(f"{CYCLES} cycles: {elapsed / CYCLES * 1e6:.1f} us per cycle")
