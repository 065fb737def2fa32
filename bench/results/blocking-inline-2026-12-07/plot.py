"""Medians over the pairs of p50, before and after, per case and size, with Open MPI's 8 B at
2 ranks for scale; and the after / before ratio per pair. Usage: plot.py [pairs.csv] [out.png]"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

d = pd.read_csv(sys.argv[1] if len(sys.argv) > 1 else "pairs.csv")
mpi = d[d.case == "mpi2"].p50_us.median()
k = d[d.case != "mpi2"]
p = k.pivot_table(index=["case", "bytes", "pair"], columns="build", values="p50_us")
p["ratio"] = p["new"] / p["old"]
g = p.groupby(level=[0, 1])
m = g.agg(old=("old", "median"), new=("new", "median")).reset_index()
labels = [f"{c}\n{b if b < 1024 else str(b // 1024) + 'K'}" for c, b in zip(m.case, m.bytes)]
fig, axes = plt.subplots(2, 1, figsize=(12, 7))
x = range(len(m))
axes[0].bar([i - 0.2 for i in x], m.old, width=0.4, label="before")
axes[0].bar([i + 0.2 for i in x], m.new, width=0.4, label="blocking calls on their own thread")
axes[0].axhline(mpi, color="k", ls="--", lw=1, label=f"Open MPI 8 B, 2 ranks ({mpi:.2f} us)")
axes[0].set_yscale("log")
axes[0].set_ylabel("p50 (us), median of pairs")
axes[0].set_xticks(list(x), labels, fontsize=7)
axes[0].legend(fontsize=8)
ratios = [p.loc[(c, b), "ratio"].values for c, b in zip(m.case, m.bytes)]
axes[1].boxplot(ratios, positions=list(x))
axes[1].axhline(1.0, color="k", lw=1)
axes[1].set_yscale("log")
axes[1].set_ylabel("after / before, per pair (log)")
axes[1].set_xticks(list(x), labels, fontsize=7)
fig.tight_layout()
fig.savefig(sys.argv[2] if len(sys.argv) > 2 else "pairs.png", dpi=100)
