"""Warm the kernel cache: compile every registered kernel instantiation for an arch.

    python tools/precompile.py --arch 90 [--arch 80] [--jobs N] [--family copy ...]

Instantiations are compiled one per NVRTC program (the unit the runtime looks up), in
parallel worker processes, with a progress bar on a terminal (plain lines otherwise).
Entries already in the cache are counted, not compiled, so a second run is fast.
``python -m tenferro_cuda --all`` does the same work.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tenferro_cuda.kernels.precompile import Progress, plan, run  # noqa: E402
from tenferro_cuda.kernels.registry import family_names  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", type=int, action="append", help="sm_N (repeatable; 90)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--family", action="append", choices=family_names())
    args = parser.parse_args()
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1 (got {args.jobs})")
    jobs = plan(args.arch or [90], every=True, names=args.family)
    tally = run(jobs, workers=args.jobs, progress=Progress(len(jobs)))
    archs = ", ".join(f"sm_{a}" for a in tally.archs)
    fams = f"{tally.families} {'family' if tally.families == 1 else 'families'}"
    print(f"{tally.kernels} kernels of {fams} for {archs}: compiled {tally.compiled}, "
          f"from the cache {tally.cached}, in {tally.seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
