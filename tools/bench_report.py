"""Render ``bench/results.json`` as a Markdown table, a PNG chart, and the README section.

    python tools/bench_report.py [bench/results.json]   # writes bench/results.md,
                                                         # bench/results.png (matplotlib),
                                                         # and README's benchmark section
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def _fmt(v) -> str:
    if v is None:
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 else (f"{v:,.1f}" if abs(v) >= 10 else f"{v:.2f}")


def ratio(row: dict) -> float | None:
    """ours / best peer, oriented so that > 1 means tenferro_cuda is better."""
    lower_better = row["unit"] in ("us", "ms")
    peers = [p for p in (row.get("torch"), row.get("cupy")) if p]
    if not peers or not row["ours"]:
        return None
    best = min(peers) if lower_better else max(peers)
    return best / row["ours"] if lower_better else row["ours"] / best


def table(data: dict) -> str:
    copy = data.get("copy_bandwidth_gbps")
    lines = [
        f"Latest run: {data['gpu']}, {data['date']}, `{data['command']}`"
        + (f" of commit {data['tree']}" if data.get("tree") else "")
        + f" (device copy bandwidth {_fmt(copy)} GB/s).",
        "",
        "| family | figure | tenferro_cuda | PyTorch | CuPy | vs best peer | % of copy BW "
        "| target |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in data["rows"]:
        r = ratio(row)
        share = (f"{100 * row['ours'] / copy:.0f}%" if copy and row["unit"] == "GB/s" else "")
        lines.append(
            f"| {row['family']} | {row['name']} | {_fmt(row['ours'])} {row['unit']} | "
            f"{_fmt(row.get('torch'))} | {_fmt(row.get('cupy'))} | "
            f"{'' if r is None else f'{r:.2f}×'} | {share} | {row.get('target', '')} |")
    if data.get("failures"):
        lines += ["", f"Families that failed in this run: {', '.join(data['failures'])}."]
    return "\n".join(lines)


def chart(data: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = [(f"{r['family']}: {r['name']}"[:70], ratio(r)) for r in data["rows"]]
    rows = [(n, v) for n, v in rows if v is not None]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.2))
    names, values = zip(*rows)
    colors = ["#2a9d8f" if v >= 1 else "#e76f51" for v in values]
    ax.barh(range(len(rows)), values, color=colors)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(range(len(rows)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("tenferro_cuda vs best of PyTorch/CuPy (>1: faster)")
    ax.set_title(f"{data['gpu']} — {data['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def update_readme(text: str, image: bool) -> None:
    readme = ROOT / "README.md"
    body = readme.read_text()
    if START not in body:
        return
    block = f"{START}\n{text}\n" + ("\n![benchmark chart](bench/results.png)\n" if image else "")
    head, rest = body.split(START, 1)
    tail = rest.split(END, 1)[1]
    readme.write_text(f"{head}{block}{END}{tail}")


def main() -> int:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "results.json"
    data = json.loads(src.read_text())
    text = table(data)
    out = ROOT / "bench"
    out.mkdir(exist_ok=True)
    (out / "results.md").write_text(text + "\n")
    image = chart(data, out / "results.png") or (out / "results.png").exists()
    update_readme(text, image)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
