"""``python -m tenferro_cuda``: environment report and self-check.

Exit status: 0 when the installation works (also on a machine with no driver or no GPU,
where the report says "no GPU" and the whole ``ptx/`` tree is still compiled for sm_90 as
a check); non-zero on any real failure.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import __version__
from .errors import CudaDeviceError


def _compile_tree(arch: int = 90) -> tuple[int, int, float]:
    """Compile every registered instantiation, one NVRTC program per family."""
    from .kernels.compiler import compile_family
    from .kernels.registry import families

    start = time.perf_counter()
    count = 0
    fams = families()
    for name, fam in fams.items():
        exprs = tuple(fam.all_expressions())
        compile_family(name, exprs, arch)
        count += len(exprs)
    return len(fams), count, time.perf_counter() - start


def _report_environment() -> list:
    from . import _driver, _nvrtc
    from .kernels.compiler import shared_cache

    major, minor = _nvrtc.version()
    cache = shared_cache()
    entries, size = cache.disk_usage()
    print(f"tenferro_cuda {__version__}")
    print(f"NVRTC {major}.{minor}")
    print(f"kernel cache: {cache.directory} ({entries} entries, {size / 1e6:.1f} MB)")
    _driver.init()
    version = _driver.driver_version()
    print(f"CUDA driver {version // 1000}.{version % 1000 // 10}")
    count = _driver.device_count()
    if count == 0:
        raise CudaDeviceError("no CUDA device: the driver reports 0 devices")
    return list(range(count))


def _self_check(ordinal: int) -> None:
    from . import cuda_exec_session
    from .runtime import Capability

    with cuda_exec_session(ordinal) as s:
        info = s.device_info()
        print(f"device {ordinal}: {info.name}, sm_{info.arch}, {info.total_memory / 2**30:.1f} "
              f"GiB, {info.multiprocessor_count} SMs, L2 {info.l2_cache_bytes / 2**20:.0f} MiB, "
              f"peak {info.peak_bandwidth_gbps:.0f} GB/s, {info.uuid}")
        caps = [c.value for c in Capability if s.supports(c)]
        print(f"  capabilities: {', '.join(caps)}")
        rng = np.random.default_rng(0)
        a = rng.standard_normal((512, 384)).astype(np.float32)
        t0 = time.perf_counter()
        x = s.upload_host_tensor(a)
        xt = s.to_contiguous_read(x.T) if hasattr(s, "to_contiguous_read") else None
        with s.kernels("self_check") as ks:
            ks.scale_tensor_write(x, 3.0)
        back = s.download_to_host(x).numpy()
        t1 = time.perf_counter()
        checks = [("upload/scale/download", np.array_equal(back, a * np.float32(3.0)))]
        if xt is not None:
            checks.append(("transpose view", np.array_equal(s.download_to_host(xt).numpy(), a.T)))
        checks.append(("strided download", np.array_equal(
            s.download_to_host(x[::3, ::-2]).numpy(), (a * np.float32(3.0))[::3, ::-2])))
        s.synchronize()
        for name, ok in checks:
            print(f"  {name}: {'ok' if ok else 'MISMATCH'}")
        print(f"  self-check round trip: {1e3 * (t1 - t0):.2f} ms (includes first-use compiles)")
        if not all(ok for _, ok in checks):
            raise SystemExit(1)


def main() -> int:
    try:
        devices = _report_environment()
    except CudaDeviceError as exc:
        print(f"no GPU: {exc}")
        fams, n, secs = _compile_tree(90)
        print(f"installation check: compiled {n} kernels of {fams} families for sm_90 "
              f"in {secs:.1f} s")
        return 0
    for ordinal in devices:
        _self_check(ordinal)
    print("self-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
