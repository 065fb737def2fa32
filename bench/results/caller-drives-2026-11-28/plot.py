"""Plots p50 latency against size from run.sh's CSV: one panel per rank count, one line per
system, the median over runs. Usage: plot.py RUNS.csv OUT.png TITLE"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

runs = pd.read_csv(sys.argv[1])
medians = runs.groupby(["ranks", "system", "bytes"]).p50_us.median().reset_index()
ranks = sorted(medians.ranks.unique())
fig, axes = plt.subplots(1, len(ranks), figsize=(6 * len(ranks), 4.2), sharey=True)
for ax, n in zip(axes, ranks):
    for system in sorted(medians.system.unique(), key=lambda s: (s == "mpi", s)):
        rows = medians[(medians.ranks == n) & (medians.system == system)]
        if rows.empty:
            continue
        style = "--" if system == "mpi" else "-"
        ax.plot(rows.bytes, rows.p50_us, style, marker="o", label=system)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("allreduce size (bytes)")
    ax.set_title(f"{n} ranks")
    ax.grid(True, which="both", alpha=0.3)
axes[0].set_ylabel("p50 latency (us), median over runs")
axes[-1].legend()
fig.suptitle(sys.argv[3])
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
