"""Plots after.csv (after.sh's rounds): median p50 against size for kfbench's AUTO (halving-doubling
at these sizes), kfbench's ring (AUTO before), Open MPI and Gloo, with each round as a dot.
Writes after.png. Run with /usr/bin/python3 from this directory."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

d = pd.read_csv("after.csv")
d["series"] = d.variant + " " + d.system
names = {"auto kfbench": "kfbench AUTO (halving-doubling)", "ring kfbench": "kfbench ring (AUTO before)",
         "auto mpi": "Open MPI (TCP BTL)", "auto gloo": "Gloo"}
fig, ax = plt.subplots(figsize=(7, 4.5))
for key, label in names.items():
    s = d[d.series == key]
    med = s.groupby("bytes").p50_us.median() / 1000
    line, = ax.plot(med.index / 2**20, med.values, marker="o", label=label)
    ax.scatter(s.bytes / 2**20, s.p50_us / 1000, s=10, color=line.get_color(), alpha=0.4)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("allreduce size (MiB)")
ax.set_ylabel("p50 (ms), slowest rank")
ax.set_title("4 ranks, 4 network namespaces, 10 Gbit/s tbf links (medians of 4 rounds)")
ax.legend()
fig.tight_layout()
fig.savefig("after.png", dpi=110)
