"""The report of an A/B run of bench/ab_pairs.sh: per case and size, the medians over the pairs
of p50 before and after, the median of after / before per pair and in how many pairs after was
faster; each kfbench p50 over Open MPI's 8-byte p50 of its own pair (the machine's mode then);
and a plot of the same. Prints a Markdown table.
Usage: /usr/bin/python3 bench/ab_pairs_report.py PAIRS.csv [OUT.png] [LABEL]"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd


def size_label(b: int) -> str:
    """8 -> "8 B", 4096 -> "4 KiB", 1048576 -> "1 MiB"."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale and b % scale == 0:
            return f"{b // scale} {unit}"
    return f"{b} B"


def main() -> None:
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else path.rsplit(".", 1)[0] + ".png"
    label = sys.argv[3] if len(sys.argv) > 3 else "after"
    d = pd.read_csv(path)
    mpi = d[d.case == "mpi2"].set_index("pair").p50_us
    k = d[d.case != "mpi2"]
    p = k.pivot_table(index=["case", "bytes", "pair"], columns="build", values="p50_us")
    p["ratio"] = p["new"] / p["old"]
    p["new_over_mpi"] = p["new"] / p.index.get_level_values("pair").map(mpi).values
    g = p.groupby(level=[0, 1], sort=False)
    m = g.agg(
        pairs=("ratio", "size"),
        old=("old", "median"),
        new=("new", "median"),
        ratio=("ratio", "median"),
        faster=("ratio", lambda r: int((r < 1).sum())),
        new_over_mpi=("new_over_mpi", "median"),
    ).reset_index()
    print(f"Open MPI 8 B at 2 ranks, per pair: median {mpi.median():.3f} us, "
          f"{mpi.min():.3f}-{mpi.max():.3f}\n")
    print("| case | size | pairs | before, us | after, us | after / before | faster | after / Open MPI 8 B |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in m.itertuples():
        print(f"| {r.case} | {size_label(r.bytes)} | {r.pairs} | {r.old:.2f} | {r.new:.2f} | "
              f"{r.ratio:.2f} | {r.faster} of {r.pairs} | {r.new_over_mpi:.2f} |")
    labels = [f"{c}\n{size_label(b)}" for c, b in zip(m.case, m.bytes)]
    fig, axes = plt.subplots(2, 1, figsize=(12, 7))
    x = list(range(len(m)))
    axes[0].bar([i - 0.2 for i in x], m.old, width=0.4, label="before")
    axes[0].bar([i + 0.2 for i in x], m.new, width=0.4, label=label)
    axes[0].axhline(mpi.median(), color="k", ls="--", lw=1,
                    label=f"Open MPI 8 B, 2 ranks ({mpi.median():.2f} us)")
    axes[0].set_yscale("log")
    axes[0].set_ylabel("p50 (us), median of pairs")
    axes[0].set_xticks(x, labels, fontsize=7)
    axes[0].legend(fontsize=8)
    axes[1].boxplot([p.loc[(c, b), "ratio"].values for c, b in zip(m.case, m.bytes)], positions=x)
    axes[1].axhline(1.0, color="k", lw=1)
    axes[1].set_yscale("log")  # a job in one of the machine's slow modes is off by 5-50x
    axes[1].set_ylabel("after / before, per pair (log)")
    axes[1].set_xticks(x, labels, fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main()
