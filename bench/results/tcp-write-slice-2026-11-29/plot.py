"""netns.csv and host.csv -> slice.png: busbw against size, kfbench before and after the TCP write
slice beside Open MPI and Gloo (measured in the same invocations), one panel per world and rank
count, each point a run.

    /usr/bin/python3 plot.py
"""
import csv
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
fig, axes = plt.subplots(2, 2, figsize=(11, 8))
for row, world in enumerate(("netns", "host")):
    with open(os.path.join(here, f"{world}.csv")) as f:
        rows = list(csv.DictReader(f))
    for col, ranks in enumerate((2, 4)):
        ax = axes[row][col]
        series = defaultdict(list)
        for r in rows:
            if int(r["ranks"]) != ranks or not r["busbw_GBps"]:
                continue
            label = f"kfbench {r['build']}" if r["system"] == "kfbench" else r["system"]
            series[label].append((int(r["bytes"]), float(r["busbw_GBps"])))
        for label, pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", label=label, alpha=0.7)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{world}, {ranks} ranks")
        ax.set_xlabel("bytes")
        ax.set_ylabel("busbw, GB/s")
        ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(here, "slice.png"), dpi=100)
