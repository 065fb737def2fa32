"""Reads jobs.csv (jobs.sh): per case, build and size the p50 over jobs, and how many jobs ran
the size over 5 us and over 100 us (up to 4 KiB, a fast job takes under 5 us: two spinners on one
core take 8-20 us with yields, about 420 without)."""
import sys

import pandas as pd

d = pd.read_csv(sys.argv[1] if len(sys.argv) > 1 else "jobs.csv")
k = d[d.build != "mpi"]
g = k.groupby(["case", "build", "bytes"]).p50_us
t = pd.DataFrame({"jobs": g.count(), "min": g.min(), "median": g.median(), "max": g.max(),
                  "over_5us": g.apply(lambda x: int((x > 5).sum())),
                  "over_100us": g.apply(lambda x: int((x > 100).sum()))})
print(t.to_string())
print("Open MPI 8 B at 2 ranks, p50 over pairs: median %.3f us, range %.3f-%.3f" %
      (d[d.build == "mpi"].p50_us.median(), d[d.build == "mpi"].p50_us.min(),
       d[d.build == "mpi"].p50_us.max()))
