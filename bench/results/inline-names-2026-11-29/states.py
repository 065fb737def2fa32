"""The 8-byte cases at 2 ranks from pairs2.csv, small.csv and small2.csv (the final build), split by
the machine's state in each pair, read from the build before's p50 (fast under 1.2 us, middle
under 1.7, slow above). Medians of p50 and of the per-pair ratio, and in how many pairs the new
build was faster. Usage: states.py (in this folder)."""
import pandas as pd

d = pd.concat([pd.read_csv(f).assign(set=f) for f in ["pairs2.csv", "small.csv", "small2.csv"]])
d = d[(d["build"] != "mpi") & (d["bytes"] == 8) & d["case"].isin(["busy2", "default2"])]
p = d.pivot_table(index=["case", "set", "pair"], columns="build", values="p50_us")
p["ratio"] = p["new"] / p["old"]
p["state"] = pd.cut(p["old"], [0, 1.2, 1.7, 1e9], labels=["fast", "middle", "slow"])
out = p.groupby(["case", "state"], observed=True).agg(
    pairs=("ratio", "size"), old=("old", "median"), new=("new", "median"),
    ratio=("ratio", "median"), faster=("ratio", lambda r: int((r < 1).sum())))
print(out.to_string(float_format=lambda x: f"{x:.2f}"))
