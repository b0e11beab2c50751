"""``python -m tenferro_cuda``: environment report and installation check.

Prints the versions and the kernel cache, compiles one instantiation of every ``ptx/``
family per arch into the kernel cache (``--all``: every instantiation) with a progress
bar on a terminal, reports "compiled N, from the cache M", and on a machine with a GPU
runs a self-check on every device (upload, a library kernel, downloads, against numpy).
The archs are those of the visible devices, sm_90 without one; ``--arch`` overrides.

Exit status: 0 when the installation works, also on a machine with no driver or no GPU
(one line says what is missing; the compile is checked all the same); 1 on any real
failure (a kernel that does not compile, a self-check mismatch).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from ._version import __version__
from .errors import CompileError, CudaDeviceError, ValidationError
from .kernels.registry import family_names

NO_GPU_ARCH = 90
MAX_LINE = 119


def _parser() -> argparse.ArgumentParser:
    names = family_names()
    parser = argparse.ArgumentParser(
        prog="python -m tenferro_cuda",
        description="Report the environment and check the installation: compile one "
                    "instantiation of every ptx/ family per arch into the kernel cache, "
                    "then self-check every GPU.")
    parser.add_argument("--all", action="store_true",
                        help="compile every registered instantiation (minutes on a small "
                             "machine; `make precompile` does the same)")
    parser.add_argument("--arch", type=int, action="append", metavar="N",
                        help="target sm_N (repeatable; default: the devices' archs, or "
                             f"{NO_GPU_ARCH} without a GPU)")
    parser.add_argument("--family", action="append", choices=names, metavar="NAME",
                        help=f"only this kernel family (repeatable; one of "
                             f"{', '.join(names)}; default: all)")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="compile in N processes (default: 1, or the CPU count with "
                             "--all)")
    return parser


def no_gpu_line(exc: CudaDeviceError) -> str:
    """One line, under 120 characters, saying what is missing (the loader's own detail,
    which repeats it, is left out)."""
    what = str(exc.args[0]) if exc.args else str(exc)
    line = "no GPU: " + what.split(" (", 1)[0]
    return line if len(line) <= MAX_LINE else line[:MAX_LINE - 3] + "..."


def _report_environment() -> list[tuple[int, int]]:
    """Print versions and the cache; the (ordinal, arch) of every device (raises
    CudaDeviceError without a driver or a device)."""
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
    out = []
    for ordinal in range(count):
        attrs = _driver.device_attributes(_driver.device(ordinal))
        out.append((ordinal, 10 * attrs["cc_major"] + attrs["cc_minor"]))
    return out


def _compile_check(args: argparse.Namespace, jobs: list) -> None:
    from .kernels.precompile import Progress, run

    workers = args.jobs or ((os.cpu_count() or 1) if args.all else 1)
    tally = run(jobs, workers=workers, progress=Progress(len(jobs)))
    targets = ", ".join(f"sm_{a}" for a in tally.archs)
    what = "every instantiation" if args.all else "one instantiation per family"
    fams = f"{tally.families} {'family' if tally.families == 1 else 'families'}"
    print(f"installation check ({what}): {tally.kernels} kernels of {fams} for {targets}: "
          f"compiled {tally.compiled}, from the cache {tally.cached}, in {tally.seconds:.1f} s")


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


def _check_nvrtc_archs(parser: argparse.ArgumentParser, archs: list[int]) -> None:
    """A usage error (one line, status 2) for an arch this NVRTC does not compile for."""
    from ._nvrtc import supported_archs

    try:
        known = supported_archs()
    except Exception:  # noqa: BLE001 - no NVRTC: the compile check reports that itself
        return
    unknown = [a for a in archs if a not in known]
    if unknown:
        parser.error(f"--arch {unknown[0]}: this NVRTC compiles for sm_"
                     f"{', sm_'.join(str(a) for a in known)}")


def main(argv: list[str] | None = None) -> int:
    from .kernels.precompile import check_archs, plan

    parser = _parser()
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be >= 1 (got {args.jobs})")
    if args.arch:
        try:
            check_archs(args.arch)
        except ValidationError as exc:
            parser.error(str(exc))
        _check_nvrtc_archs(parser, args.arch)
    try:
        devices = _report_environment()
    except CudaDeviceError as exc:
        print(no_gpu_line(exc))
        devices = []
    archs = args.arch or sorted({arch for _, arch in devices}) or [NO_GPU_ARCH]
    try:
        _compile_check(args, plan(archs, every=args.all, names=args.family))
    except CompileError as exc:
        print(f"installation check failed: a kernel does not compile:\n{exc}")
        return 1
    for ordinal, _ in devices:
        _self_check(ordinal)
    if devices:
        print("self-check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
