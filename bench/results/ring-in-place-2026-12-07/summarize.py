#!/usr/bin/env python3
"""Medians of p50 per case and size over the pairs (old, new, Open MPI where it ran), the ratio
new/old of those medians, how many pairs new was faster in, and new's time over Open MPI's by the
median pair. Usage: summarize.py [pairs.csv]"""
import sys

import pandas as pd

d = pd.read_csv(sys.argv[1] if len(sys.argv) > 1 else "pairs.csv")
rows = []
for (case, size), g in d.groupby(["case", "bytes"]):
    x = g.pivot_table(index="pair", columns="build", values="p50_us")
    if "old" not in x or "new" not in x:  # Open MPI's 8 B (ab_pairs.sh's mpi8) stands alone
        continue
    row = {"case": case, "bytes": size, "old_us": x["old"].median(), "new_us": x["new"].median()}
    row["new/old"] = row["new_us"] / row["old_us"]
    row["faster"] = f"{int((x['new'] < x['old']).sum())} of {len(x)}"
    if "mpi" in x:
        row["mpi_us"] = x["mpi"].median()
        row["new/mpi"] = (x["new"] / x["mpi"]).median()
        row["old/mpi"] = (x["old"] / x["mpi"]).median()
    rows.append(row)
print(pd.DataFrame(rows).round(2).to_string(index=False))
