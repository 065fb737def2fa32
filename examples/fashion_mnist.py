"""A CNN on the real Fashion-MNIST, trained by KungFu's optimizers or by DDP on backend "kungfu".

    kfrun -np 4 /usr/bin/python3 examples/fashion_mnist.py --optimizer sma --epochs 2
    kfrun -np 4 /usr/bin/python3 examples/fashion_mnist.py --optimizer ddp

(with the package on PYTHONPATH: eval "$(./kf env)"). Optimizers: ssgd (synchronous SGD: averaged
gradients), sma (synchronous model averaging), adasgd (SMA, then S-SGD), pair (pair averaging:
AD-PSGD over the peer-to-peer store), ddp (torch's DistributedDataParallel on the "kungfu"
backend). Each worker trains on its shard of the 60,000
training images (batch --batch per worker); after each epoch rank 0 prints one JSON line with the
test accuracy on the 10,000 test images and the wall time so far.
"""

import argparse
import json
import time

import torch
import torch.nn as nn

import kungfu
import kungfu.torch as kt
from kungfu.torch.data import ShardSampler, fashion_mnist


def cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def accuracy(model: nn.Module, images: torch.Tensor, labels: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        correct = sum(int((model(images[i:i + 1000]).argmax(1) == labels[i:i + 1000]).sum())
                      for i in range(0, len(images), 1000))
    model.train()
    return correct / len(images)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--optimizer", default="ssgd",
                    choices=["ssgd", "sma", "adasgd", "pair", "ddp"])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32, help="samples per worker per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    ap.add_argument("--limit", type=int, default=0, help="train on the first N images (0: all)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    start = time.perf_counter()
    kungfu.init()  # first: the launcher's ports are taken at once, not after loading the data
    train_x, train_y = fashion_mnist(train=True)
    test_x, test_y = fashion_mnist(train=False)
    if a.limit:
        train_x, train_y = train_x[:a.limit], train_y[:a.limit]
    torch.manual_seed(a.seed)
    model = cnn()
    base = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    if a.optimizer == "ddp":
        torch.distributed.init_process_group("kungfu")
        net = nn.parallel.DistributedDataParallel(model)
        opt = base
    else:
        net = model
        wrap = {"ssgd": kt.SynchronousSGDOptimizer,
                "sma": lambda o, named_parameters: kt.SynchronousAveragingOptimizer(
                    o, named_parameters, alpha=0.1),
                "adasgd": lambda o, named_parameters: kt.AdaptiveSGDOptimizer(
                    o, named_parameters, alpha=0.1, change_step=200),
                "pair": lambda o, named_parameters: kt.PairAveragingOptimizer(
                    o, named_parameters, seed=a.seed)}[a.optimizer]
        opt = wrap(base, named_parameters=model.named_parameters())
        kt.broadcast_parameters(model.state_dict())
    sampler = ShardSampler(len(train_x), seed=a.seed)
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        order = list(sampler)
        for i in range(0, len(order) - a.batch + 1, a.batch):
            idx = order[i:i + a.batch]
            opt.zero_grad()
            nn.functional.cross_entropy(net(train_x[idx]), train_y[idx]).backward()
            opt.step()
        acc = accuracy(model, test_x, test_y)
        if kungfu.rank() == 0:
            print(json.dumps({"optimizer": a.optimizer, "workers": kungfu.size(),
                              "epoch": epoch + 1, "test_accuracy": acc,
                              "wall_s": round(time.perf_counter() - start, 1)}), flush=True)
    if a.optimizer == "ddp":
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
