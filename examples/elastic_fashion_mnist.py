"""Elastic training: the Fashion-MNIST CNN with S-SGD on a cluster that resizes itself while it
trains (2 -> 4 -> 3 workers by default), with kungfu.torch.elastic.

    kfrun -w -np 2 -H 127.0.0.1:4 -builtin-config-port 9100 \\
        /usr/bin/python3 examples/elastic_fashion_mnist.py --schedule 300:4,600:3

(with the package on PYTHONPATH: eval "$(./kf env)"). At each step of --schedule (step:workers)
every worker calls State.resize; kfrun starts the workers the new cluster adds and the ones it
drops exit. The new cluster takes rank 0's model, optimizer and progress, and the data sampler
resumes where the cluster left off in the epoch, sharded for the new size. Rank 0 prints one JSON
line per resize and per epoch (test accuracy, wall time).
"""

import argparse
import json
import time

import torch
import torch.nn as nn

import kungfu
import kungfu.torch as kt
from kungfu.torch.data import fashion_mnist
from kungfu.torch.elastic import ElasticSampler, State, run

from fashion_mnist import accuracy, cnn


def parse_schedule(text: str) -> dict:
    schedule = {}
    for item in filter(None, text.split(",")):
        step, _, workers = item.partition(":")
        if not (step.isdigit() and workers.isdigit() and int(workers) > 0):
            raise SystemExit(f"--schedule {text!r}: want step:workers,... (e.g. 300:4,600:3)")
        schedule[int(step)] = int(workers)
    return schedule


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedule", default="300:4,600:3", help="step:workers,... resizes")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32, help="samples per worker per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    schedule = parse_schedule(a.schedule)
    torch.set_num_threads(1)
    start = time.perf_counter()
    train_x, train_y = fashion_mnist(train=True)
    test_x, test_y = fashion_mnist(train=False)
    kungfu.init(timeout=120)
    torch.manual_seed(a.seed)
    model = cnn()
    opt = kt.SynchronousSGDOptimizer(torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9),
                                     named_parameters=model.named_parameters())
    state = State(model, opt, epoch=0, step=0, samples=0)

    def log(**fields) -> None:
        if kungfu.rank() == 0:
            fields["wall_s"] = round(time.perf_counter() - start, 1)
            print(json.dumps(fields), flush=True)

    @run
    def train(state: State) -> int:
        log(event="synced", workers=kungfu.size(), step=state.step, epoch=state.epoch,
            joined=kungfu.joining())
        while state.epoch < a.epochs:
            sampler = ElasticSampler(len(train_x), a.batch, seed=a.seed, epoch=state.epoch,
                                     start=state.samples)
            for idx in sampler:
                opt.zero_grad()
                nn.functional.cross_entropy(model(train_x[idx]), train_y[idx]).backward()
                opt.step()
                state.step += 1
                state.samples += sampler.step_samples
                if state.step in schedule:
                    state.resize(schedule[state.step])
            state.epoch, state.samples = state.epoch + 1, 0
            log(event="epoch", epoch=state.epoch, workers=kungfu.size(), step=state.step,
                test_accuracy=accuracy(model, test_x, test_y))
        return state.step

    if train(state) is None:
        print(f"left the cluster at step {state.step}", flush=True)


if __name__ == "__main__":
    main()
