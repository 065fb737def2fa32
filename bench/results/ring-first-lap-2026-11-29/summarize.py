"""Medians over pairs of p50 per case and size, new / old per pair and in how many pairs new was
faster. Usage: summarize.py [pairs.csv]"""
import sys

import pandas as pd

d = pd.read_csv(sys.argv[1] if len(sys.argv) > 1 else "pairs.csv")
p = d.pivot_table(index=["case", "bytes", "pair"], columns="build", values="p50_us")
p["ratio"] = p["new"] / p["old"]
g = p.groupby(level=[0, 1])
out = g.agg(old=("old", "median"), new=("new", "median"), ratio=("ratio", "median"),
            faster=("ratio", lambda r: int((r < 1).sum())), pairs=("ratio", "size"))
print(out.to_string(float_format=lambda x: f"{x:.2f}"))
