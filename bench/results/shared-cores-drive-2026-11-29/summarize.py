"""Medians of p50 per case, build and size from pairs.csv (pairs.sh), with each pair's new / old
ratio (median, and in how many pairs the new build was faster) and Open MPI's beside them.

    /usr/bin/python3 summarize.py [pairs.csv]
"""

import sys

import pandas as pd


def main() -> None:
    d = pd.read_csv(sys.argv[1] if len(sys.argv) > 1 else "pairs.csv")
    d["np"] = d["case"].str.extract(r"(\d+)$").astype(int)
    rows = []
    for (case, size), g in d.groupby(["case", "bytes"]):
        kf = g[g.build != "mpi"].pivot_table(index="pair", columns="build", values="p50_us")
        mpi = d[(d.build == "mpi") & (d.np == g.np.iloc[0]) & (d.bytes == size)].p50_us
        if "old" not in kf or "new" not in kf:
            continue
        ratio = (kf["new"] / kf["old"]).dropna()
        np_ = g.np.iloc[0]
        new = kf["new"].median()
        rows.append({
            "case": case, "bytes": size, "pairs": len(ratio),
            "old_us": round(kf["old"].median(), 1), "new_us": round(new, 1),
            "new/old": round(ratio.median(), 2), "new_faster_in": int((ratio < 1).sum()),
            "mpi_us": round(mpi.median(), 1) if len(mpi) else None,
            "busbw_new/mpi": round(mpi.median() / new, 2) if len(mpi) else None,
            "busbw_new_GBps": round(size / new / 1e3 * 2 * (np_ - 1) / np_, 3),
        })
    print(pd.DataFrame(rows).to_string(index=False))


if __name__ == "__main__":
    main()
