#!/usr/bin/env python3
"""pairs.png: for each case, the median over the pairs of each build's p50 over Open MPI's in the
same pair (below 1: faster than Open MPI), by size. Usage: plot.py [pairs.csv] [pairs.png]"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

src = sys.argv[1] if len(sys.argv) > 1 else "pairs.csv"
dst = sys.argv[2] if len(sys.argv) > 2 else "pairs.png"
d = pd.read_csv(src)
cases = [c for c in ("medium2", "medium4") if c in set(d["case"])]
fig, axes = plt.subplots(1, len(cases), figsize=(5.5 * len(cases), 4), squeeze=False)
for ax, case in zip(axes[0], cases):
    x = d[d["case"] == case].pivot_table(index=["bytes", "pair"], columns="build", values="p50_us")
    for build, label in (("old", "before"), ("new", "read in place")):
        r = (x[build] / x["mpi"]).groupby(level="bytes").median()
        ax.plot(r.index, r.values, marker="o", label=label)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("allreduce bytes")
    ax.set_ylabel("p50 / Open MPI's p50 (median pair)")
    ax.set_title(f"{case[-1]} ranks, one host, 2 cores")
    ax.legend()
fig.tight_layout()
fig.savefig(dst, dpi=120)
