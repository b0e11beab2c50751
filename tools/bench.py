"""The benchmark report: every figure the project tracks, beside PyTorch and CuPy.

Usage (on a GPU host): ``python tools/bench.py [family ...] [--json bench/results.json]``.
Each module in ``tools/benches/`` with a ``run(session) -> list[Row]`` is a family.
Device timings are CUDA-event medians after warm-up; host costs are wall-clock per call
including the final synchronize.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import pkgutil
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import benches  # noqa: E402

import tenferro_cuda as tc  # noqa: E402


def _fmt(v) -> str:
    return "-" if v is None else (f"{v:,.1f}" if abs(v) >= 10 else f"{v:.2f}")


def _ratio(row) -> str:
    peers = [p for p in (row.torch, row.cupy) if p]
    if not peers or not row.ours:
        return "-"
    best = max(peers) if row.unit not in ("us", "ms") else min(peers)
    r = row.ours / best if row.unit not in ("us", "ms") else best / row.ours
    return f"{r:.2f}x"


def _tree() -> str | None:
    """The short commit of the measured tree, with ``+changes`` when tracked files differ
    from it (a copied working tree whose git metadata is older than its files); None
    outside a git checkout."""
    import subprocess

    def git(*args: str) -> str | None:
        try:
            res = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                                 text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return res.stdout.strip() if res.returncode == 0 else None

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no")
    return head + ("+changes" if changed else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("families", nargs="*")
    parser.add_argument("--json", default=str(ROOT / "bench" / "results.json"))
    args = parser.parse_args()
    names = [m.name for m in pkgutil.iter_modules(benches.__path__) if m.name != "common"]
    chosen = args.families or ["foundation"] + [n for n in sorted(names) if n != "foundation"]
    rows, failures = [], []
    tree = _tree()
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every family, so a run cut short keeps what it measured
        out.write_text(json.dumps({
            "gpu": info.name, "date": datetime.date.today().isoformat(),
            "command": "make bench", "tree": tree, "copy_bandwidth_gbps": copy_bw,
            "rows": [r.as_dict() for r in rows], "failures": [f[0] for f in failures],
        }, indent=1))

    with tc.cuda_exec_session(0) as s:
        info = s.device_info()
        copy_bw = None
        for name in chosen:
            try:
                mod = importlib.import_module(f"benches.{name}")
                got = mod.run(s)
            except Exception:  # noqa: BLE001 - report and continue with the next family
                failures.append((name, traceback.format_exc()))
                print(f"[{name}] FAILED\n{failures[-1][1]}", flush=True)
                continue
            for row in got:
                if row.name.startswith("device copy bandwidth"):
                    copy_bw = row.ours
                share = (f"{100 * row.ours / copy_bw:.0f}%" if copy_bw and row.unit == "GB/s"
                         else "")
                print(f"{row.family:12} {row.name[:58]:58} {_fmt(row.ours):>10} {row.unit:7}"
                      f" torch {_fmt(row.torch):>9} cupy {_fmt(row.cupy):>9} {_ratio(row):>7}"
                      f" {share:>5} {row.target}", flush=True)
                rows.append(row)
            save()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
