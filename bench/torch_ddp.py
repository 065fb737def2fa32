"""One side of `./kf bench torch`: DistributedDataParallel training throughput on one backend.

    kfrun -np 4 python3 bench/torch_ddp.py BACKEND [--model resnet18|mlp] [--steps N] ...

BACKEND "none" runs DDP over gloo with a communication hook that sends nothing (each rank keeps
its own gradients): the same processes computing without gradient traffic, the ceiling any
backend's throughput can reach on this host.

A ResNet-18 (CIFAR layout, 11.2 M parameters, 32x32 inputs) or an MLP of about the same size, on
synthetic data, SGD with momentum; every rank times the same steps after a warm-up, and rank 0
prints one JSON line: backend, ranks, samples/s (the whole job's), step time p50 and mean.
"""

import argparse
import json
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import kungfu.torch  # noqa: F401  (registers the "kungfu" backend)


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = nn.Sequential()
        if stride != 1 or cin != cout:
            self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.short(x))


def resnet18(classes: int = 10) -> nn.Module:
    layers, cin = [], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    return nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))


def mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 2048), nn.ReLU(),
                         nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("backend")
    ap.add_argument("--model", default="resnet18", choices=["resnet18", "mlp"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16, help="samples per worker per step")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo" if a.backend == "none" else a.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = resnet18() if a.model == "resnet18" else mlp()
    ddp = nn.parallel.DistributedDataParallel(model)
    if a.backend == "none":
        def keep_local(_state, bucket):
            future = torch.futures.Future()
            future.set_result(bucket.buffer())
            return future
        ddp.register_comm_hook(None, keep_local)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(a.batch, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    times = []
    for step in range(a.warmup + a.steps):
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    # A step lasts as long as its slowest rank.
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    total = float(slowest.sum())
    if rank == 0:
        params = sum(p.numel() for p in model.parameters())
        print(json.dumps({"backend": a.backend, "model": a.model, "parameters": params,
                          "ranks": size, "batch_per_worker": a.batch, "steps": a.steps,
                          "samples_per_s": a.batch * size * a.steps / total,
                          "step_p50_s": statistics.median(slowest.tolist()),
                          "step_mean_s": total / a.steps}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
