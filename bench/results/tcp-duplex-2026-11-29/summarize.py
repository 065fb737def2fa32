"""Summarizes runs.csv (run.sh) and host.csv: per ranks and size, the medians of p50 for kfbench
duplex and split, Open MPI and Gloo, kfbench's duplex/split ratio per round and Gloo's time over
kfbench's (duplex) per round. Writes summary.txt and duplex.png beside itself.
    /usr/bin/python3 summarize.py
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

HERE = Path(__file__).resolve().parent


def series(g: pd.DataFrame, variant: str, system: str) -> pd.Series:
    """p50 in ms by round for one variant and system."""
    x = g[(g.variant == variant) & (g.system == system)]
    return x.set_index("round").p50_us.sort_index() / 1000


def fmt(s: pd.Series) -> str:
    return f"{s.median():.2f} ({s.min():.2f}-{s.max():.2f})" if len(s) else "-"


def summarize(csv: Path, title: str, lines: list[str]) -> pd.DataFrame:
    d = pd.read_csv(csv)
    lines += [f"## {title} ({csv.name}): p50 in ms, median (range) over rounds", ""]
    rows = []
    for (ranks, size), g in d.groupby(["ranks", "bytes"]):
        dk, sk = series(g, "duplex", "kfbench"), series(g, "split", "kfbench")
        mpi, gloo = series(g, "duplex", "mpi"), series(g, "duplex", "gloo")
        ratio = (dk / sk).dropna()
        line = (f"{ranks} ranks {size / 2**20:g} MiB: duplex {fmt(dk)}, split {fmt(sk)}"
                f"; duplex/split per round median {ratio.median():.2f}, faster in "
                f"{(ratio < 1).sum()} of {len(ratio)}")
        if len(mpi):
            line += f"; Open MPI {fmt(mpi)}"
        if len(gloo):
            over = (gloo / dk).dropna()
            line += (f"; Gloo {fmt(gloo)}, Gloo/duplex per round {over.min():.2f}-{over.max():.2f}"
                     f" (median {over.median():.2f})")
        lines.append(line)
        rows.append({"ranks": ranks, "bytes": size, "duplex": dk.median(), "split": sk.median(),
                     "mpi": mpi.median() if len(mpi) else None,
                     "gloo": gloo.median() if len(gloo) else None})
    lines.append("")
    return pd.DataFrame(rows)


def main() -> None:
    lines: list[str] = []
    netns = summarize(HERE / "runs.csv", "Between network namespaces", lines)
    host = summarize(HERE / "host.csv", "Loopback pseudo-hosts (kfbench alone)", lines)
    (HERE / "summary.txt").write_text("\n".join(lines))
    print("\n".join(lines))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, (frame, ranks, where) in zip(axes, [(netns, 2, "netns"), (netns, 4, "netns"),
                                                (host, 2, "loopback")]):
        f = frame[frame.ranks == ranks].sort_values("bytes")
        for col, label in [("duplex", "kfbench, duplex"), ("split", "kfbench, a connection per "
                                                            "direction"),
                           ("mpi", "Open MPI"), ("gloo", "Gloo")]:
            if f[col].notna().any():
                busbw = 2 * (ranks - 1) / ranks * f.bytes / (f[col] / 1000) / 1e9
                ax.plot(f.bytes, busbw, marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes")
        ax.set_ylabel("busbw, GB/s (median of p50)")
        ax.set_title(f"{ranks} ranks, {where}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "duplex.png", dpi=110)


if __name__ == "__main__":
    main()
