"""p50 against size per system from run.sh's CSVs (four.csv, two.csv): medians over the runs.

Usage: /usr/bin/python3 plot.py  (writes four.png and two.png beside the CSVs)
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).resolve().parent


def plot(csv: Path) -> None:
    d = pd.read_csv(csv)
    med = d.groupby(["system", "bytes"]).p50_us.median().unstack(0)
    ranks = int(d.ranks.iloc[0])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system in med.columns:
        ax.plot(med.index, med[system], marker="o", label=system)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("allreduce size (bytes)")
    ax.set_ylabel("p50 (us), median over runs")
    ax.set_title(f"{ranks} ranks on one 2-core host ({d.run.max()} runs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(csv.with_suffix(".png"), dpi=120)


if __name__ == "__main__":
    for name in ("four.csv", "two.csv"):
        plot(HERE / name)
