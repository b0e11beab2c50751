"""Experiment: contiguous elementwise kernel variants (unroll x grid policy) on 2^28
float32 add and exp, timed with CUDA events. Run one variant per process:

    python tools/experiments/ew_variants.py UNROLL   # prints GB/s for grid=wave and =full
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from benches.common import gbps, session_ms  # noqa: E402

import tenferro_cuda as tc  # noqa: E402
from tenferro_cuda.kernels import compiler  # noqa: E402
from tenferro_cuda.ops import elementwise_engine  # noqa: E402

unroll = int(sys.argv[1])
compiler.BASE_OPTIONS = compiler.BASE_OPTIONS + (f"-DTF_EW_UNROLL={unroll}",)
elementwise_engine.UNROLL = unroll
n = 1 << 28
with tc.cuda_exec_session(0) as s:
    rng = np.random.default_rng(0)
    a = s.upload_host_tensor(rng.random(n, dtype=np.float32))
    b = s.upload_host_tensor(rng.random(n, dtype=np.float32))
    cases = (("add", lambda: s.add(a, b), 12 * n), ("exp", lambda: s.exp(a), 8 * n))
    for name, fn, nbytes in cases:
        fn()
        preps = [p for k, p in s._state.prepared.items() if isinstance(k, tuple) and
                 len(k) == 3 and k[1] == name]
        wave = preps[0].cap
        for policy, cap in (("wave", wave), ("full", 1 << 30)):
            preps[0].cap = cap
            ms = session_ms(s, fn, warmup=3, iters=15)
            print(f"unroll={unroll} grid={policy:4} {name}: {gbps(nbytes, ms):,.0f} GB/s")
        preps[0].cap = wave
