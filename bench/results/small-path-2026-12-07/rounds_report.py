"""Per-round medians and ratios of rounds.sh's CSV: busy-polling kfbench before and after the
change against Open MPI's 8-byte allreduce of the same round, and a plot of each round.
Usage: /usr/bin/python3 rounds_report.py [rounds.csv] [rounds.png]"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

path = sys.argv[1] if len(sys.argv) > 1 else "rounds.csv"
d = pd.read_csv(path).pivot(index="round", columns="system", values="p50_us")
mpi = d.mpi_allreduce_8B
print("| p50, us | median | 25-75% | rounds at most 3x Open MPI's | median / Open MPI's |")
print("|---|---:|---:|---:|---:|")
for name in ("kfbench_before", "kfbench_after", "mpi_allreduce_8B", "ring_one_way_80B"):
    ratio = d[name] / mpi
    print(f"| {name} | {d[name].median():.3f} | {d[name].quantile(0.25):.3f}-"
          f"{d[name].quantile(0.75):.3f} | {int((ratio <= 3).sum())} of {len(d)} | "
          f"{ratio.median():.2f} |")
after_before = d.kfbench_after / d.kfbench_before
print(f"\nafter / before per round: median {after_before.median():.2f}, after faster in "
      f"{int((after_before < 1).sum())} of {len(d)}")
fig, ax = plt.subplots(figsize=(12, 4))
for name, style in (("kfbench_before", "o-"), ("kfbench_after", "s-"),
                    ("mpi_allreduce_8B", "^-"), ("ring_one_way_80B", "x-")):
    ax.plot(d.index, d[name], style, ms=3, lw=0.8, label=name)
ax.set_xlabel("round")
ax.set_ylabel("p50 (us)")
ax.set_ylim(bottom=0)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2] if len(sys.argv) > 2 else "rounds.png", dpi=100)
