#!/usr/bin/env python3
"""Medians and per-round ratios of a rounds.sh CSV: kf-land against kf-copy, and each kfbench
against the peer system, by size.

    /usr/bin/python3 report.py rounds-2r.csv [...]   -> a markdown table on stdout
"""
import sys

import pandas as pd


def table(path: str) -> str:
    d = pd.read_csv(path)
    peer = [s for s in d.system.unique() if not s.startswith("kf-")][0]
    w = d.pivot_table(index=["round", "bytes"], columns="system", values="busbw_GBps")
    rows = []
    for size, g in w.groupby(level="bytes"):
        land_copy = (g["kf-land"] / g["kf-copy"]).dropna()
        rows.append({
            "bytes": size,
            "rounds": len(g),
            "kf-land busbw": round(g["kf-land"].median(), 3),
            "kf-copy busbw": round(g["kf-copy"].median(), 3),
            f"{peer} busbw": round(g[peer].median(), 3),
            "land / copy (median of rounds)": round(land_copy.median(), 3),
            "land faster in": f"{int((land_copy > 1).sum())} of {len(land_copy)}",
            f"land / {peer}": round((g["kf-land"] / g[peer]).dropna().median(), 3),
            f"copy / {peer}": round((g["kf-copy"] / g[peer]).dropna().median(), 3),
        })
    t = pd.DataFrame(rows)
    lines = ["| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
    lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in t.itertuples(index=False)]
    return f"### {path} ({int(d.ranks.iloc[0])} ranks)\n\n" + "\n".join(lines) + "\n"


if __name__ == "__main__":
    print("\n".join(table(p) for p in sys.argv[1:]))
