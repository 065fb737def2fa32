#!/usr/bin/env python3
"""Medians and per-round ratios of rounds.sh CSVs (kf-land against kf-copy, and each against the
peer system, by size) as markdown tables, and a plot of busbw against size, one panel a CSV.

    /usr/bin/python3 report.py rounds-2r.csv rounds-4r.csv ... [--plot landing.png]
"""
import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def peer_of(d: pd.DataFrame) -> str:
    return [s for s in d.system.unique() if not s.startswith("kf-")][0]


def table(path: str) -> str:
    """The markdown table of one CSV."""
    d = pd.read_csv(path)
    peer = peer_of(d)
    w = d.pivot_table(index=["round", "bytes"], columns="system", values="busbw_GBps")
    cols = ["bytes", "rounds", "kf-land busbw", "kf-copy busbw", f"{peer} busbw",
            "land / copy (median of rounds)", "land faster in", f"land / {peer}", f"copy / {peer}"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for size, g in w.groupby(level="bytes"):
        land_copy = (g["kf-land"] / g["kf-copy"]).dropna()
        row = [size, len(g), f"{g['kf-land'].median():.3f}", f"{g['kf-copy'].median():.3f}",
               f"{g[peer].median():.3f}", f"{land_copy.median():.3f}",
               f"{int((land_copy > 1).sum())} of {len(land_copy)}",
               f"{(g['kf-land'] / g[peer]).dropna().median():.3f}",
               f"{(g['kf-copy'] / g[peer]).dropna().median():.3f}"]
        lines.append("| " + " | ".join(str(v) for v in row) + " |")
    return f"### {path} ({int(d.ranks.iloc[0])} ranks)\n\n" + "\n".join(lines) + "\n"


def plot(paths: list[str], out: str) -> None:
    """busbw medians against size, a line per system, one panel per CSV."""
    cols = min(3, len(paths))
    rows = (len(paths) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[len(paths):]:
        ax.set_visible(False)
    for ax, path in zip(axes.flat, paths):
        d = pd.read_csv(path)
        for system, g in d.groupby("system"):
            m = g.groupby("bytes").busbw_GBps.median()
            color = {"kf-land": "tab:green", "kf-copy": "tab:orange"}.get(system, "tab:blue")
            ax.plot(m.index / 2**20, m.values, marker="o", label=system, color=color)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("MiB")
        ax.set_ylabel("busbw, GB/s (median of rounds)")
        ax.set_title(f"{path} ({int(d.ranks.iloc[0])} ranks)", fontsize=9)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--plot", help="write the plot here")
    a = ap.parse_args()
    print("\n".join(table(p) for p in a.csv))
    if a.plot:
        plot(a.csv, a.plot)
