"""pairs.csv -> pairs.png: medians of p50 over the pairs per call, the package before and after
and gloo, a panel per rank count (log scale). Run with /usr/bin/python3 (pandas, matplotlib)."""
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

here = pathlib.Path(__file__).resolve().parent
d = pd.read_csv(here / "pairs.csv")
builds = {"old": "kungfu, before", "new": "kungfu, after", "gloo": "gloo"}
calls = sorted(d.call.unique())
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for ax, (ranks, g) in zip(axes, d.groupby("ranks")):
    width = 0.8 / len(builds)
    for i, (build, label) in enumerate(builds.items()):
        m = g[g.build == build].groupby("call").p50_us.median().reindex(calls)
        ax.bar([c + i * width for c in range(len(calls))], m.values, width, label=label)
    ax.set_xticks([c + width for c in range(len(calls))])
    ax.set_xticklabels([c.replace("kungfu.", "kf.").replace("(async_op)", "(async)")
                        for c in calls], rotation=15, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("8-byte call p50, us (median of pairs)")
    ax.set_title(f"{ranks} ranks, one host (2 cores)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(here / "pairs.png", dpi=120)
