"""CSV (default pairs.csv) -> OUT (default summary.txt): per rank count and call, the medians of p50 over the pairs (us) for
the package before and after and for gloo, the median of the per-pair ratios after / before, and
in how many pairs after was faster."""

import statistics
import sys
from pathlib import Path

import pandas as pd

here = Path(__file__).resolve().parent
csv = Path(sys.argv[1]) if len(sys.argv) > 1 else here / "pairs.csv"
out = Path(sys.argv[2]) if len(sys.argv) > 2 else here / "summary.txt"
d = pd.read_csv(csv)
lines = [f"{'ranks':>5} {'call':<38} {'before':>8} {'after':>8} {'gloo':>8} "
         f"{'after/before':>12} {'faster':>8}"]
for (ranks, call), g in d.groupby(["ranks", "call"], sort=True):
    by = g.pivot_table(index="pair", columns="build", values="p50_us")
    if "old" not in by or "new" not in by:
        continue
    ratio = (by["new"] / by["old"]).dropna()
    gloo = by["gloo"].median() if "gloo" in by else float("nan")
    lines.append(f"{ranks:>5} {call:<38} {by['old'].median():>8.2f} {by['new'].median():>8.2f} "
                 f"{gloo:>8.2f} {statistics.median(ratio):>12.3f} "
                 f"{int((ratio < 1).sum()):>3} of {len(ratio):<2}")
text = "\n".join(lines) + "\n"
out.write_text(text)
print(text, end="")
