"""pairs.csv -> pairs.png: medians of p50 over the pairs against size, one line per build, a panel
per rank count. Run with /usr/bin/python3 (pandas, matplotlib)."""
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

here = pathlib.Path(__file__).resolve().parent
d = pd.read_csv(here / "pairs.csv")
labels = {"old": "Python, before", "new": "Python, one call", "cxx": "C++ (kfbench)"}
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, (case, g) in zip(axes, d.groupby("case")):
    for build, label in labels.items():
        m = g[g.build == build].groupby("bytes").p50_us.median()
        ax.plot(m.index, m.values, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes")
    ax.set_ylabel("allreduce p50, us (median of pairs)")
    ax.set_title(f"{case[2:]} ranks, one host")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
fig.tight_layout()
fig.savefig(here / "pairs.png", dpi=120)
