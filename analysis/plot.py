#!/usr/bin/python3
"""Plots the output records of kfsim and real runs as PNG + PDF next to them.

    analysis/plot.py DIR [DIR...] [--out DIR] [--label NAME ...]

DIR is a kfsim output directory (steps.csv, ...), a kfrun output directory (kftrain -out: one
<ip>.<port>/ per worker), a kfsim sweep (sweep.csv), a directory of runs (a scenario's variants),
or a kfbench --json file. With several, the runs are also overlaid (compare_*.png/pdf in --out,
default the first DIR). Exit codes: 0 done, 1 a missing or malformed record (named), 2 usage,
3 matplotlib missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", metavar="DIR", help="output directories or kfbench --json files")
    ap.add_argument("--out", help="where overlays of several runs go (default: the first DIR)")
    ap.add_argument("--label", action="append", default=[], help="legend name of each DIR, in order")
    ap.add_argument("-q", "--quiet", action="store_true", help="do not list the files written")
    args = ap.parse_args(argv)
    try:
        from kfplot.report import plot_paths
        from kfplot.records import RecordError
    except ImportError as e:
        print(f"plot.py: {e}: install Debian's python3-matplotlib and python3-numpy "
              "(./kf setup does) and run with /usr/bin/python3", file=sys.stderr)
        return 3
    try:
        written = plot_paths(args.paths, args.out, args.label)
    except RecordError as e:
        print(f"plot.py: error: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        for p in written:
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
