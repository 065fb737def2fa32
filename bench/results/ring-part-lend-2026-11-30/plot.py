"""p50 against size for the build before, this one and Open MPI, medians over the pairs, at 4 and
8 ranks on 2 cores. Usage: plot.py [pairs.csv] [out.png]"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

d = pd.read_csv(sys.argv[1] if len(sys.argv) > 1 else "pairs.csv")
m = d.groupby(["case", "build", "bytes"])["p50_us"].median().reset_index()
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, case in zip(axes, ["np4", "np8"]):
    for build, label in [("old", "before"), ("new", "ring parts lent"), ("mpi", "Open MPI")]:
        s = m[(m.case == case) & (m.build == build)]
        ax.plot(s.bytes / 1024, s.p50_us, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("allreduce size (KiB)")
    ax.set_ylabel("p50 (us), median of pairs")
    ax.set_title(f"{case[2:]} ranks on 2 cores")
    ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2] if len(sys.argv) > 2 else "pairs.png", dpi=100)
