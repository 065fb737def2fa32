"""./kf bench torch_sim, the plain-Python side: the same training step as bench/torch_sim_bench.cc
(one batch of the task's first samples, forward, loss, backward) with no embedding around it,
under the same settings kfsim uses (one thread, deterministic algorithms). One JSON line.

    python3 bench/torch_sim_ref.py --module FILE.py [--batch 32] [--reps 200] [--warmup 20]
"""

import argparse
import json
import time

import torch

from kungfu.torch.task import load


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    task = load(a.module)
    x, y = task.data(True)
    idx = torch.arange(a.batch) % x.shape[0]
    xb, yb = x[idx].contiguous(), y[idx].contiguous()
    model = task.model(1)
    model.train()
    ms = []
    for i in range(a.warmup + a.reps):
        begin = time.perf_counter()
        for p in model.parameters():
            p.grad = None
        loss = task.loss(model(xb), yb)
        loss.backward()
        float(loss)
        end = time.perf_counter()
        if i >= a.warmup:
            ms.append((end - begin) * 1e3)
    ms.sort()
    print(json.dumps({"side": "python", "module": a.module, "batch": a.batch,
                      "parameters": sum(p.numel() for p in model.parameters()), "reps": a.reps,
                      "median_ms": round(ms[len(ms) // 2], 4), "p10_ms": round(ms[len(ms) // 10], 4),
                      "p90_ms": round(ms[len(ms) * 9 // 10], 4)}))


if __name__ == "__main__":
    main()
