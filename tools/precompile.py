"""Warm the kernel cache: compile every registered kernel instantiation for an arch.

    python tools/precompile.py --arch 90 [--jobs N] [--family copy ...]

Instantiations are compiled one per NVRTC program (the unit the runtime looks up), in
parallel worker processes, with a progress bar. Entries already in the cache are skipped
by the cache itself, so a second run is fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tenferro_cuda.kernels.compiler import compile_count, compile_family  # noqa: E402
from tenferro_cuda.kernels.registry import families  # noqa: E402


def _one(job: tuple[str, str, int]) -> tuple[str, int]:
    name, expr, arch = job
    before = compile_count["n"]
    compile_family(name, (expr,), arch)
    return expr, compile_count["n"] - before


def _bar(done: int, total: int, compiled: int, start: float) -> None:
    width = 40
    filled = width * done // max(total, 1)
    rate = done / max(time.perf_counter() - start, 1e-9)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} "
                     f"({compiled} compiled, {rate:.1f}/s)")
    sys.stderr.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arch", type=int, default=90)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--family", action="append", default=[])
    args = parser.parse_args()
    fams = families()
    chosen = args.family or sorted(fams)
    jobs = [(n, e, args.arch) for n in chosen for e in fams[n].all_expressions()]
    start = time.perf_counter()
    compiled = done = 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(_one, job) for job in jobs]
        for fut in as_completed(futures):
            compiled += fut.result()[1]
            done += 1
            _bar(done, len(jobs), compiled, start)
    sys.stderr.write("\n")
    print(f"{len(jobs)} kernels of {len(chosen)} families for sm_{args.arch}: {compiled} "
          f"compiled, {len(jobs) - compiled} from the cache, {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
