"""The adaptive-batch policy (KungFu paper, Fig. 4) on Fashion-MNIST: S-SGD with a gradient noise
scale monitor, whose estimate drives the C++ adaptive_batch_size policy through
kungfu.torch.PolicyRunner; every worker changes its batch size (and learning rate) at the same
step.

    kfrun -np 4 /usr/bin/python3 examples/adaptive_batch_fashion.py --epochs 1

(with the package on PYTHONPATH: eval "$(./kf env)"). Each worker measures the noise scale of its
gradients in S-SGD's hooks (no extra communication) and hands it to the runner as the "gns"
metric; every --interval steps the policy sets the batch to scale x the workers' mean estimate,
split over the workers and clamped to [--min-batch, --max-batch], with the learning rate
rescaled by --lr-rule. The cluster consumes each epoch's shuffled order window by window
(size x batch samples per step), so a batch change takes effect at the next step without
reshuffling. Rank 0 prints one JSON line per batch change, one per epoch, and a last one with
the test accuracy on the 10,000 test images, every batch change and whether all workers hold
the same batch history and model.
"""

import argparse
import json
import time

import numpy as np
import torch
import torch.nn as nn

import kungfu
import kungfu.torch as kt
from kungfu.torch.data import fashion_mnist

from fashion_mnist import accuracy, cnn  # the same CNN as examples/fashion_mnist.py


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: no limit)")
    ap.add_argument("--batch", type=int, default=16, help="initial samples per worker per step")
    ap.add_argument("--lr", type=float, default=0.05, help="initial learning rate")
    ap.add_argument("--interval", type=int, default=20, help="steps between decisions")
    ap.add_argument("--min-batch", type=int, default=16)
    ap.add_argument("--max-batch", type=int, default=256)
    ap.add_argument("--scale", type=float, default=1.0, help="global batch = scale x GNS")
    ap.add_argument("--lr-rule", default="sqrt", choices=["linear", "sqrt", "none"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    start = time.perf_counter()
    train_x, train_y = fashion_mnist(train=True)
    kungfu.init()
    rank, size = kungfu.rank(), kungfu.size()
    torch.manual_seed(a.seed)
    model = cnn()
    gns = kt.GradientNoiseScale(batch_size=a.batch)
    opt = kt.SynchronousSGDOptimizer(torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9),
                                     named_parameters=model.named_parameters(), monitors=[gns])
    kt.broadcast_parameters(model.state_dict())
    policy = (f"adaptive_batch_size:interval={a.interval},min_batch={a.min_batch},"
              f"max_batch={a.max_batch},scale={a.scale},lr_rule={a.lr_rule}")
    # The runner sets the learning rate on the optimizer and the batch size on the monitor.
    runner = kt.PolicyRunner([policy], batch_size=a.batch, optimizer=opt, monitors=[gns],
                             total_steps=a.steps)
    changes = []
    runner.before_train()
    for epoch in range(a.epochs):
        runner.before_epoch(epoch)
        order = torch.randperm(len(train_x), generator=torch.Generator().manual_seed(
            a.seed * 1_000_003 + epoch))
        at = 0
        while at + size * runner.batch_size <= len(order) and not runner.stopped:
            if a.steps and runner.step >= a.steps:
                break
            b = runner.batch_size
            idx = order[at + rank * b:at + (rank + 1) * b]
            at += size * b
            runner.before_step()
            opt.zero_grad()
            nn.functional.cross_entropy(model(train_x[idx]), train_y[idx]).backward()
            opt.step()
            for action in runner.after_step({"gns": gns.noise_scale}):
                if isinstance(action, kt.SetBatchSize):
                    # The policy's sums: the workers' estimates, and how many gave one.
                    total, count = runner.sums
                    changes.append({"step": runner.step, "from": b, "to": action.per_worker,
                                    "mean_gns": round(total / count, 1)})
                    if rank == 0:
                        print(json.dumps({"event": "batch", **changes[-1],
                                          "lr": round(runner.learning_rate, 5)}), flush=True)
        runner.after_epoch()
        if rank == 0:
            print(json.dumps({"epoch": epoch + 1, "steps": runner.step, "batch": runner.batch_size,
                              "wall_s": round(time.perf_counter() - start, 1)}), flush=True)
        if a.steps and runner.step >= a.steps:
            break
    runner.after_train()
    # Every worker took the same decisions and holds the same model.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    history = json.dumps([(c["step"], c["to"]) for c in changes]).encode()
    agreed = kungfu.consensus(np.frombuffer(history, dtype=np.uint8).copy(), name="example.history")
    agreed = kungfu.consensus(flat, name="example.model") and agreed
    if rank == 0:
        test_x, test_y = fashion_mnist(train=False)
        print(json.dumps({"final": True, "workers": size, "steps": runner.step,
                          "batch": runner.batch_size,
                          "learning_rate": round(runner.learning_rate, 5),
                          "batch_changes": [[c["step"], c["from"], c["to"]] for c in changes],
                          "agreed": agreed, "test_accuracy": accuracy(model, test_x, test_y),
                          "wall_s": round(time.perf_counter() - start, 1)}), flush=True)


if __name__ == "__main__":
    main()
