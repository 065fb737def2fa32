"""pairs.csv -> the medians over the pairs (summary.txt): old, new and C++ p50 in us, the median of
the per-pair ratios new / old, in how many pairs new was faster, and new / C++."""
import sys, pandas as pd
d = pd.read_csv(sys.argv[1] if len(sys.argv) > 1 else "pairs.csv")
p = d.pivot_table(index=["case", "bytes", "pair"], columns="build", values="p50_us")
p["ratio"] = p.new / p.old
g = p.groupby(level=[0, 1])
out = pd.DataFrame({"old": g.old.median(), "new": g.new.median(), "cxx": g.cxx.median(),
                    "new/old": g.ratio.median(), "faster": g.ratio.apply(lambda r: f"{(r<1).sum()}/{len(r)}"),
                    "new/cxx": (p.new / p.cxx).groupby(level=[0, 1]).median()})
print(out.round(3).to_string())
