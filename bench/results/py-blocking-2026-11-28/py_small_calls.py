"""kungfu.barrier, broadcast and consensus from Python, back to back (as bench/py_allreduce.py
times allreduce): rank 0 prints one JSON line per call, p50 of the slowest rank in us.

    kfrun -np N python3 py_small_calls.py [-n 2000] [-w 200]
"""
import argparse
import json
import statistics
import time

import numpy as np

import kungfu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("-w", type=int, default=200)
    a = ap.parse_args()
    kungfu.init(timeout=120)
    x = np.ones(2, dtype=np.float32)
    calls = {"barrier": kungfu.barrier,
             "broadcast 8 B": lambda: kungfu.broadcast(x, inplace=True),
             "consensus 8 B": lambda: kungfu.consensus(x)}
    for what, call in calls.items():
        times = []
        for i in range(a.w + a.n):
            t0 = time.perf_counter()
            call()
            if i >= a.w:
                times.append(time.perf_counter() - t0)
        slowest = kungfu.allreduce(np.array(times), "max")
        if kungfu.rank() == 0:
            print(json.dumps({"call": what, "ranks": kungfu.size(),
                              "p50_us": round(statistics.median(slowest.tolist()) * 1e6, 2)}),
                  flush=True)


if __name__ == "__main__":
    main()
