"""The report of rounds.sh: per round, the busy-polling 8-byte allreduce at 2 workers (kfbench)
and at 2 ranks (Open MPI), the crossing alone and the probe's figures; the rounds split by the
state kfbench's 2-worker call ran in (slow: p50 above 0.75 us), with the medians of every measure
in each state, kfbench over Open MPI per round, and a plot over the rounds.
Given pause_rounds.sh's CSV instead (kf_before_us, kf_after_us), the rounds split by where the
crossing says the two CPUs were, with the builds' medians and after / before per round.
Usage: /usr/bin/python3 report.py ROUNDS.csv [OUT.png]   (prints Markdown)"""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

SLOW_US = 0.75  # between the two states of a 2-worker call (about 0.6 and 0.9-1.0 us)
# One-way crossing bounds, us: below, hardware threads of one core; above, cores far apart.
SIBLINGS_US, FAR_US = 0.08, 0.25


def before_after(d: pd.DataFrame) -> None:
    """pause_rounds.sh's rounds by where the two CPUs were."""
    d["where"] = pd.cut(d["crossing_us"], [0, SIBLINGS_US, FAR_US, float("inf")],
                        labels=["one core's two threads", "two cores", "two cores far apart"])
    d["ab"] = d["kf_after_us"] / d["kf_before_us"]
    print("| CPUs (by the crossing) | rounds | crossing, us | Open MPI, us | before, us | after, us "
          "| after / before | faster | before / Open MPI |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for where, x in d.groupby("where", observed=True):
        print(f"| {where} | {len(x)} | {x.crossing_us.median():.3f} | {x.mpi_2ranks_us.median():.3f} "
              f"| {x.kf_before_us.median():.2f} | {x.kf_after_us.median():.2f} | {x.ab.median():.3f} "
              f"| {int((x.ab < 1).sum())} of {len(x)} "
              f"| {(x.kf_before_us / x.mpi_2ranks_us).median():.2f} |")


def main() -> None:
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else path.rsplit(".", 1)[0] + ".png"
    d = pd.read_csv(path).pivot(index="round", columns="measure", values="value")
    if "kf_before_us" in d:
        before_after(d)
        return
    d["ratio"] = d["kf_2workers_us"] / d["mpi_2ranks_us"]
    d["state"] = (d["kf_2workers_us"] > SLOW_US).map({True: "slow", False: "fast"})
    counts = d["state"].value_counts()
    print(f"{len(d)} rounds: kfbench's 2-worker call fast in {counts.get('fast', 0)}, "
          f"slow in {counts.get('slow', 0)} (p50 above {SLOW_US} us)\n")
    med = d.groupby("state").median(numeric_only=True).T
    print("| measure | fast rounds, median | slow rounds, median |")
    print("|---|---:|---:|")
    for m, row in med.iterrows():
        print(f"| {m} | {row.get('fast', float('nan')):.3f} | {row.get('slow', float('nan')):.3f} |")
    print()
    r = d["ratio"]
    print(f"kfbench / Open MPI per round: median {r.median():.2f}, at most 3x in "
          f"{int((r <= 3).sum())} of {len(r)} rounds")
    for s in ("fast", "slow"):
        rs = r[d["state"] == s]
        if len(rs):
            print(f"- {s} rounds: median {rs.median():.2f} ({rs.min():.2f}-{rs.max():.2f}), at most "
                  f"3x in {int((rs <= 3).sum())} of {len(rs)}")
    print("\nCorrelation with kfbench's 2-worker p50 over the rounds:\n")
    c = d.corr(numeric_only=True)["kf_2workers_us"].drop(["kf_2workers_us", "ratio"])
    print(", ".join(f"{k} {v:.2f}" for k, v in c.items()))

    fig, (a, b) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    a.plot(d.index, d["kf_2workers_us"], "o-", ms=3, label="kfbench, 2 workers")
    if "kf_2workers_ring16k_us" in d:
        a.plot(d.index, d["kf_2workers_ring16k_us"], ".", ms=4, label="kfbench, 2 workers, 16 KiB rings")
    a.plot(d.index, d["kf_1worker_us"], "s-", ms=3, label="kfbench, 1 worker")
    a.plot(d.index, d["mpi_2ranks_us"], "^-", ms=3, label="Open MPI, 2 ranks")
    if "crossing_us" in d:
        a.plot(d.index, d["crossing_us"], "x-", ms=3, label="crossing alone (one way)")
    a.set_ylabel("p50, us (8 B, busy-polling)")
    a.legend(fontsize=7, ncol=2)
    b.plot(d.index, d["ratio"], "o-", ms=3, label="kfbench / Open MPI")
    b.axhline(3, color="red", lw=0.8, ls="--", label="3x (issue 33)")
    b2 = b.twinx()
    b2.plot(d.index, d["chase_4m_ns"], "--", color="gray", lw=0.8, label="4 MiB chase, ns")
    b2.set_ylabel("4 MiB pointer chase, ns a load")
    b.set_ylabel("kfbench / Open MPI")
    b.set_xlabel("round")
    b.legend(fontsize=7, loc="upper left")
    b2.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
