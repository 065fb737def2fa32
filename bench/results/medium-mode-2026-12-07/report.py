"""Tables and a plot of rounds.csv (the one-host medium-size mode): per system and size, the
median p50, how many jobs fell in the slow mode (p50 over 2.5x the system's median at that size)
and the median p50 of those.

    /usr/bin/python3 bench/results/medium-mode-2026-12-07/report.py [CSV]
Writes rounds.md and rounds.png beside the CSV."""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

SLOW = 2.5


def main() -> None:
    csv = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("rounds.csv")
    data = pd.read_csv(csv)
    lines = ["| system | size | jobs | median p50, us | slow jobs | their median p50, us |",
             "|---|---|---:|---:|---:|---:|"]
    for (system, size), g in data.groupby(["system", "bytes"]):
        median = g.p50_us.median()
        slow = g[g.p50_us > SLOW * median]
        slow_median = f"{slow.p50_us.median():.1f}" if len(slow) else ""
        lines.append(f"| {system} | {size // 1024} KiB | {len(g)} | {median:.1f} | {len(slow)} |"
                     f" {slow_median} |")
    csv.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    sizes = sorted(data.bytes.unique())
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4))
    for ax, size in zip(axes, sizes):
        for system, g in data[data.bytes == size].groupby("system"):
            ax.plot(g["round"], g.p50_us, "o-", label=system, markersize=4)
        ax.set_yscale("log")
        ax.set_title(f"allreduce {size // 1024} KiB, 2 ranks, one host")
        ax.set_xlabel("round (one job per system, in turn)")
        ax.set_ylabel("p50, us")
        ax.legend()
    fig.tight_layout()
    fig.savefig(csv.with_suffix(".png"), dpi=110)


if __name__ == "__main__":
    main()
