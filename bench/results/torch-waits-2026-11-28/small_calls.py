"""Small collectives from PyTorch code, as a training script makes them: p50 per call in us, the
slowest rank's, one JSON line from rank 0.

    kfrun -np N python3 small_calls.py BACKEND [-n ITERATIONS] [--bytes B]

BACKEND kungfu: torch.distributed.all_reduce (waited for by torch, as every call without
async_op), the same with async_op=True and .wait(), kungfu.allreduce of the tensor in place, and
kungfu.allreduce_async(...).wait() of a numpy array. BACKEND gloo: the two torch.distributed
calls only. float32, in place, back to back after 500 warm-up calls.
"""

import argparse
import json
import statistics
import time

import numpy as np
import torch
import torch.distributed as dist

import kungfu
import kungfu.torch  # noqa: F401  (registers the "kungfu" backend)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("backend", choices=("kungfu", "gloo"))
    ap.add_argument("-n", type=int, default=5000)
    ap.add_argument("--bytes", type=int, default=8)
    a = ap.parse_args()
    dist.init_process_group(a.backend)
    t = torch.ones(max(1, a.bytes // 4), dtype=torch.float32)
    x = np.ones(max(1, a.bytes // 4), dtype=np.float32)
    calls = {
        "dist.all_reduce": lambda: dist.all_reduce(t),
        "dist.all_reduce(async_op).wait": lambda: dist.all_reduce(t, async_op=True).wait(),
    }
    if a.backend == "kungfu":
        calls["kungfu.allreduce(tensor)"] = lambda: kungfu.allreduce(t, inplace=True)
        calls["kungfu.allreduce_async(numpy).wait"] = (
            lambda: kungfu.allreduce_async(x, inplace=True).wait())
    result = {"backend": a.backend, "ranks": dist.get_world_size(), "bytes": t.numel() * 4}
    for label, call in calls.items():
        times = []
        for i in range(500 + a.n):
            t0 = time.perf_counter()
            call()
            if i >= 500:
                times.append(time.perf_counter() - t0)
        slowest = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        result[label] = round(statistics.median(slowest.tolist()) * 1e6, 2)
    if dist.get_rank() == 0:
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
