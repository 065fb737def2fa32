"""Medians of p50 per system, poll, ranks and size; the second poll / the first per round, and
in how many rounds the second was faster. Usage: summarize.py FILE.csv FIRST SECOND"""
import sys

import pandas as pd

d = pd.read_csv(sys.argv[1])
first, second = sys.argv[2], sys.argv[3]
print(d.groupby(["system", "poll", "ranks", "bytes"]).p50_us.median().unstack([0, 1]).round(1)
      .to_string())
k = d[d.system == "kfbench"].pivot_table(index=["ranks", "bytes", "round"], columns="poll",
                                         values="p50_us")
k["ratio"] = k[second] / k[first]
print(k.groupby(level=[0, 1]).agg(ratio=("ratio", "median"),
                                  faster=("ratio", lambda r: int((r < 1).sum())),
                                  rounds=("ratio", "size")).round(2).to_string())
slow = d[d.system == "kfbench"].assign(over_40us=lambda x: x.p50_us > 40)
print(slow.groupby(["poll", "ranks", "bytes"]).over_40us.sum().to_string())
