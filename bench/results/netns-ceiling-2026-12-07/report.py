"""The namespace world's TCP ceiling beside the three systems' allreduce (rounds.sh's two CSVs).

Per pattern: the median over rounds of the streams' mean rate (GB/s a stream). Per rank count
and size: each system's median busbw, and per round the ratios that issue 33's targets name
(kfbench over Gloo and over Open MPI), with 1.5x Gloo's busbw beside the ceiling of the pattern
an allreduce of that many ranks makes (2 ranks: both_ways_2; 4 ranks: ring_4 and pairs_4). And kfbench_nopoll beside kfbench where
the rounds ran it. Medians and ratios skip a run that failed (its system's cell is empty).

    /usr/bin/python3 bench/results/netns-ceiling-2026-12-07/report.py [DIR]
Writes report.md and report.png into DIR (default: this script's)."""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

PATTERNS_OF = {2: ["both_ways_2"], 4: ["ring_4", "pairs_4"]}
COLORS = {"kfbench": "tab:blue", "kfbench_nopoll": "tab:cyan", "gloo": "tab:orange",
          "mpi": "tab:green"}


def size_label(b: int) -> str:
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main() -> None:
    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
    ceiling = pd.read_csv(where / "ceiling.csv")
    systems = pd.read_csv(where / "systems.csv")
    per_round = ceiling.groupby(["pattern", "round"]).agg(
        rate=("gbytes_per_s", "mean"), sender_cpu=("sender_cpu", "mean"),
        receiver_cpu=("receiver_cpu", "mean"))
    patterns = per_round.groupby("pattern").median()
    span = per_round.groupby("pattern").rate.agg(["min", "max"])
    lines = ["## The TCP ceiling (iperf3, a stream's rate, GB/s)", "",
             "| pattern | rounds | median | range | iperf3 sender / receiver CPU, % |",
             "|---|---:|---:|---|---|"]
    for p, row in patterns.iterrows():
        n = per_round.loc[p].shape[0]
        lines.append(f"| {p} | {n} | {row.rate:.3f} | {span.loc[p, 'min']:.3f}-"
                     f"{span.loc[p, 'max']:.3f} | {row.sender_cpu:.0f} / {row.receiver_cpu:.0f} |")

    wide = systems.pivot_table(index=["ranks", "bytes", "round"], columns="system",
                               values="busbw")
    lines += ["", "## The systems (busbw, GB/s, medians over rounds)", "",
              "| ranks | size | rounds | kfbench | Gloo | Open MPI | kfbench / Gloo (per round) |"
              " kfbench / Open MPI | 1.5x Gloo | ceiling |", "|---|---|---:|" + "---:|" * 7]
    for (ranks, size), g in wide.groupby(level=["ranks", "bytes"]):
        ceil = " / ".join(f"{patterns.rate[p]:.3f}" for p in PATTERNS_OF[ranks]
                          if p in patterns.index)
        over_gloo = g.kfbench / g.gloo
        over_mpi = g.kfbench / g.mpi
        lines.append(
            f"| {ranks} | {size_label(size)} | {len(g)} | {g.kfbench.median():.3f} |"
            f" {g.gloo.median():.3f} | {g.mpi.median():.3f} |"
            f" {over_gloo.median():.2f} ({over_gloo.min():.2f}-{over_gloo.max():.2f}) |"
            f" {over_mpi.median():.2f} ({over_mpi.min():.2f}-{over_mpi.max():.2f}) |"
            f" {1.5 * g.gloo.median():.3f} | {ceil} |")
    if "kfbench_nopoll" in wide.columns:
        lines += ["", "## kfbench with its workers sleeping when idle (KUNGFU_POLL_BEFORE_SLEEP=0us)",
                  "", "| ranks | size | rounds | kfbench | no poll | no poll / kfbench (per round) |"
                  " faster | no poll / Gloo |", "|---|---|---:|---:|---:|---:|---:|---:|"]
        for (ranks, size), g in wide.dropna(subset=["kfbench_nopoll"]).groupby(
                level=["ranks", "bytes"]):
            ratio = g.kfbench_nopoll / g.kfbench
            lines.append(
                f"| {ranks} | {size_label(size)} | {len(g)} | {g.kfbench.median():.3f} |"
                f" {g.kfbench_nopoll.median():.3f} | {ratio.median():.2f}"
                f" ({ratio.min():.2f}-{ratio.max():.2f}) | {(ratio > 1).sum()} of {len(g)} |"
                f" {(g.kfbench_nopoll / g.gloo).median():.2f} |")
    (where / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4))
    for ax, ranks in zip(axes, (2, 4)):
        med = systems[systems.ranks == ranks].groupby(["system", "bytes"]).busbw.median()
        top = 0.0
        for system, color in COLORS.items():
            if system in med.index.get_level_values(0):
                s = med[system]
                ax.plot(s.index, s.values, "o-", label=system, color=color)
                top = max(top, s.max())
                if system == "gloo":
                    ax.plot(s.index, 1.5 * s.values, ":", color="tab:orange", label="1.5x gloo")
                    top = max(top, 1.5 * s.max())
        for p, style in zip(PATTERNS_OF[ranks], ("--", "-.")):
            if p in patterns.index:
                ax.axhline(patterns.rate[p], linestyle=style, color="grey",
                           label=f"TCP ceiling, iperf3 ({p})")
                top = max(top, patterns.rate[p])
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, top * 1.1)
        ax.set_title(f"allreduce, {ranks} ranks, namespaces (10 Gbit/s tbf)")
        ax.set_xlabel("bytes")
        ax.set_ylabel("busbw, GB/s (median of rounds)")
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(where / "report.png", dpi=110)


if __name__ == "__main__":
    main()
