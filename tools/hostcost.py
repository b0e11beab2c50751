"""Where the host time of a small op goes: each piece timed alone (us per call).

    python tools/hostcost.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tenferro_cuda as tc  # noqa: E402
from tenferro_cuda import _driver  # noqa: E402


def per_call(fn, n: int = 20000) -> float:
    for _ in range(1000):
        fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


with tc.cuda_exec_session(0) as s:
    x = s.upload_host_tensor(np.ones(1024, np.float32))
    y = s.upload_host_tensor(np.ones(1024, np.float32))
    out = s.upload_host_tensor(np.ones(1024, np.float32))
    s.add(x, y)
    s.add_into(x, y, out)
    st = s._state.stream
    pool = s._rt.pool
    rows = [
        ("cuCtxGetCurrent (the per-op check)", _driver.current_context_id),
        ("session._begin", lambda: s._begin("add")),
        ("pool alloc+release 4 KiB", lambda: pool.alloc(4096, st).release()),
        ("add_into, 1024 f32 (no sync)", lambda: s.add_into(x, y, out)),
        ("add, 1024 f32 (no sync)", lambda: s.add(x, y)),
    ]
    for name, fn in rows:
        print(f"{name:34} {per_call(fn):6.2f} us")
        s.synchronize()
