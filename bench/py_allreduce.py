"""One side of `./kf bench torch`: allreduce latency from Python, as kfbench measures it in C++.

    kfrun -np N python3 bench/py_allreduce.py [--sizes 8,67108864] [-n 200] [-w 20]

Per size: `-w` warm-up iterations, then `-n` timed ones of kungfu.allreduce on a float32 numpy
array in place (the path a training loop takes), each preceded by nothing (back to back, as
kfbench). Rank 0 prints one JSON line per size: bytes, mean and p50 of the iteration time in us,
the slowest rank's.
"""

import argparse
import json
import statistics
import time

import numpy as np

import kungfu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,67108864", help="bytes, comma-separated")
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("-w", type=int, default=20)
    a = ap.parse_args()
    kungfu.init(timeout=120)
    for size in (int(s) for s in a.sizes.split(",")):
        x = np.ones(max(1, size // 4), dtype=np.float32)
        n = a.n
        times = []
        for i in range(a.w + n):
            t0 = time.perf_counter()
            kungfu.allreduce(x, inplace=True)
            if i >= a.w:
                times.append(time.perf_counter() - t0)
        slowest = kungfu.allreduce(np.array(times), "max")
        if kungfu.rank() == 0:
            print(json.dumps({"bytes": x.nbytes, "iterations": n, "ranks": kungfu.size(),
                              "time_us": float(np.mean(slowest)) * 1e6,
                              "p50_us": statistics.median(slowest.tolist()) * 1e6}), flush=True)


if __name__ == "__main__":
    main()
