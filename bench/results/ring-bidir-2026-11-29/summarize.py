#!/usr/bin/python3
"""Summarizes runs.csv (of this folder, or of the folder given): medians of p50 per variant and
size, and per-round ratios; writes summary.txt beside it."""
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    runs = pd.read_csv(folder / "runs.csv")
    runs["name"] = runs.apply(
        lambda r: r.variant if r.system == "kfbench" else r.system, axis=1)
    wide = runs.pivot_table(index=["round", "bytes"], columns="name", values="p50_us")
    lines = ["p50 in ms: median over rounds (min-max)"]
    for size, group in wide.groupby(level="bytes"):
        cells = []
        for name in ["bidir", "ring", "auto", "gloo", "mpi"]:
            if name in group:
                v = group[name].dropna() / 1000
                cells.append(f"{name} {v.median():.1f} ({v.min():.1f}-{v.max():.1f})")
        lines.append(f"{size >> 20} MiB: " + ", ".join(cells))
    lines.append("")
    lines.append("per-round ratios: median (min-max), rounds where the first is faster")
    for size, group in wide.groupby(level="bytes"):
        cells = []
        for a, b in [("bidir", "ring"), ("bidir", "auto"), ("auto", "ring"), ("gloo", "bidir"),
                     ("gloo", "auto"), ("mpi", "bidir"), ("mpi", "auto")]:
            if a not in group or b not in group:
                continue
            r = (group[a] / group[b]).dropna()
            if not r.empty:
                cells.append(f"{a}/{b} {r.median():.2f} ({r.min():.2f}-{r.max():.2f}, "
                             f"{(r < 1).sum()} of {len(r)})")
        lines.append(f"{size >> 20} MiB: " + "; ".join(cells))
    text = "\n".join(lines) + "\n"
    (folder / "summary.txt").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
