"""Where the host time of a small op goes: each piece timed alone (us per call).

    python tools/hostcost.py

The pieces of ``add`` on 1,024 float32: the context check an op makes, a recycled
allocation and its release, a bare pre-packed ``cuLaunchKernel`` (what every launch
costs at least), and the whole ``add`` and ``add_into`` calls, with a tensor and with a
Python float scalar as ``rhs`` (the scalar's conversion to its bits measured alone).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tenferro_cuda as tc  # noqa: E402
from tenferro_cuda import _driver, _driver_fast  # noqa: E402
from tenferro_cuda.kernels.args import ArgPack  # noqa: E402


def per_call(fn, n: int = 20000) -> float:
    for _ in range(1000):
        fn()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


def main() -> None:
    from cuda.bindings import driver as d

    print(f"launches through {_driver_fast.BINDINGS}")

    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.ones(1024, np.float32))
        y = s.upload_host_tensor(np.ones(1024, np.float32))
        out = s.upload_host_tensor(np.ones(1024, np.float32))
        s.add(x, y)
        s.add_into(x, y, out)
        s.add(x, 1.0)
        s.add_into(x, 1.0, out)
        ctx = s._ctx
        stream, home = ctx.stream, ctx.home
        fn = s._rt.function("copy", "tf::fill<tf::u32>")
        pack = ArgPack("PS4q")  # kept alive: the launch reads its block
        params = pack.pack(out.data_ptr(), b"\0\0\0\0", 1)
        ifn, istream, launch_fast = int(fn), int(stream), _driver_fast.launch
        from tenferro_cuda.ops.elementwise import fast
        from tenferro_cuda.shapes.elementwise import KINDS

        impl, into = type(s).add.__wrapped_op__, type(s).add_into.__wrapped_op__
        p = ctx.memo[(KINDS["add"].key, "add")][tc.float32]
        launch = p.small  # the launch of a 1,024-element run
        go = launch.bound(4)
        # the addresses outside the timed call: the row times the launch, not data_ptr()
        po, px, py = out.data_ptr(), x.data_ptr(), y.data_ptr()
        rows = [
            ("_driver.current_context_id (legacy)", _driver.current_context_id),
            ("raw cuCtxGetCurrent binding", d.cuCtxGetCurrent),
            ("add impl without the facade", lambda: impl(ctx, x, y)),
            ("add_into impl (no alloc)", lambda: into(ctx, x, y, out)),
            ("fast.scalar into (no alloc)", lambda: fast.scalar(p, x, 1.0, 1, out)),
            ("scalar 1.0 to float32 bits", lambda: p.bits(1.0)),
            ("PreparedLaunch.run alone", lambda: launch.run(4, po, px, py, 0, 1024, 8)),
            ("pack + bound launch alone", lambda: (launch.pack(po, px, py, 0, 1024, 8), go())),
            ("recycled 4 KiB alloc + release", lambda: home.alloc(4096)),
            ("bare cuLaunchKernel, pre-packed",
             lambda: d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, stream, params, 0)),
            ("bare _driver_fast.launch, pre-packed",
             lambda: launch_fast(ifn, 1, 1, 1, 32, 1, 1, 0, istream, params, 0)),
            ("_driver_fast.current (the per-op check)", _driver_fast.current),
            ("add_into, 1024 f32 (no sync)", lambda: s.add_into(x, y, out)),
            ("add, 1024 f32 (no sync)", lambda: s.add(x, y)),
            ("add_into x + 1.0 (no sync)", lambda: s.add_into(x, 1.0, out)),
            ("add x + 1.0 (no sync)", lambda: s.add(x, 1.0)),
        ]
        for name, fn_ in rows:
            print(f"{name:38} {per_call(fn_):6.2f} us")
            s.synchronize()


if __name__ == "__main__":
    main()
