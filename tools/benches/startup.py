"""Start-up figures, each in a new process: the first call of a cached kernel beside CuPy's,
and the time to a first result (import, device, one add, download) for us, PyTorch and
CuPy, with our time split into its parts.

Every script runs twice against one cache directory (ours: TENFERRO_CUDA_CACHE_DIR,
CuPy's: CUPY_CACHE_DIR); the second, warm run is reported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap

from .common import Row

FAMILY = "startup"

OURS = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import numpy as np
    import tenferro_cuda as tc
    t1 = time.perf_counter()
    with tc.cuda_exec_session(0) as s:
        t2 = time.perf_counter()
        x = s.upload_host_tensor(np.ones(1000, np.float32))
        s.synchronize()
        t3 = time.perf_counter()
        y = s.add(x, x)
        s.synchronize()
        t4 = time.perf_counter()
        s.download_to_host(y)
        t5 = time.perf_counter()
    print("PARTS", *(1e3 * v for v in (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)))
""")
TORCH = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import torch
    x = torch.ones(1000, device="cuda")
    y = (x + x).cpu()
    print("PARTS", 1e3 * (time.perf_counter() - t0))
""")
CUPY = textwrap.dedent("""
    import time
    t0 = time.perf_counter()
    import cupy
    x = cupy.ones(1000, dtype=cupy.float32)
    cupy.cuda.runtime.deviceSynchronize()
    t1 = time.perf_counter()
    y = x + x
    cupy.cuda.runtime.deviceSynchronize()
    t2 = time.perf_counter()
    y.get()
    print("PARTS", 1e3 * (time.perf_counter() - t0), 1e3 * (t2 - t1))
""")


def _warm(code: str, env_var: str | None) -> list[float] | None:
    """The PARTS figures of the second of two runs sharing one cache directory (named to
    the script by ``env_var``), or None when the script failed."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, **({env_var: cache} if env_var else {}))
        out = None
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True)
            if res.returncode:
                return None
            out = res.stdout
    found = re.search(r"PARTS (.*)", out or "")
    return [float(v) for v in found.group(1).split()] if found else None


def run(s) -> list[Row]:
    rows = []
    ours = _warm(OURS, "TENFERRO_CUDA_CACHE_DIR")
    torch = _warm(TORCH, None) if _importable("torch") else None
    cupy = _warm(CUPY, "CUPY_CACHE_DIR") if _importable("cupy") else None
    if ours is None:
        return rows
    imp, device, upload, add, download, total = ours
    rows.append(Row(FAMILY, "first call of a cached kernel (add of 1,000 f32, new process)",
                    "ms", add, cupy=cupy[1] if cupy else None, target="<= 1 ms"))
    rows.append(Row(FAMILY, "time to a first result, warm caches (import .. download)", "ms",
                    total, torch=torch[0] if torch else None, cupy=cupy[0] if cupy else None,
                    note=f"import {imp:.1f}, session (driver, context) {device:.1f}, "
                         f"upload {upload:.1f}, first add {add:.2f}, download "
                         f"{download:.2f} ms"))
    return rows


def _importable(name: str) -> bool:
    res = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True)
    return res.returncode == 0
