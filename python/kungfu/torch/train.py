"""Trains a task module (kungfu.torch.task) in the real world, under kfrun:

    kfrun -np 4 /usr/bin/python3 -m kungfu.torch.train examples/fashion_cnn.py \\
        --optimizer ssgd --batch 32 --lr 0.05 --steps 200 --eval-every 50 --out runs/real

(with the package on PYTHONPATH: eval "$(./kf env)"). One process per worker; rank 0 prints one
JSON line per evaluation and a last one ("final": true), and with --out writes DIR/steps.csv
(step, samples, loss, accuracy, test_loss, batch, cluster_size, lr, wall_s) and DIR/final.json;
--save-params adds DIR/params.npy (rank 0's parameters, flat float32 in named_parameters order)
and DIR/params-rank<R>.npy on every rank.

Options: --optimizer ssgd | sma | pair | adasgd (kungfu.torch's SynchronousSGDOptimizer,
SynchronousAveragingOptimizer, PairAveragingOptimizer, AdaptiveSGDOptimizer; --alpha and
--change-step set SMA's and AdaSGD's), --local sgd | adam with --momentum, --batch (per worker),
--lr, --steps / --epochs, --seed, --policy SPEC (repeatable; the C++ policies by name as
PolicyRunner takes them, e.g. adaptive_batch_size:interval=10,max_batch=256: a gradient noise
scale monitor feeds it the "gns" metric, with S-SGD), --threads (torch threads, default 1),
--eval-every N (steps; 0: never), --limit-train / --limit-test (the first N samples).

Elastic: under `kfrun -w`, a policy's resize (scheduled_resize, elastic_provisioning) resizes the
cluster through kungfu.torch.elastic: the new cluster takes rank 0's model, optimizer state,
progress and policy state, and every worker re-shards the data for its new rank and size.

**The same math as kfsim.** Run with the same task module, seed, optimizer, batch, learning rate
and number of workers, this trains the model kfsim's numeric workers train:

- initial parameters: task.model(seed) on every worker, then rank 0's broadcast (kfsim's
  "model/init" broadcast);
- samples: kfsim's own kf::ShardSampler (workloads/dataset.h, through kungfu._core): every epoch
  a permutation of the training set from seed and epoch (std::mt19937_64), of which rank r takes
  positions r, r + n, ...; batches continue across epoch ends; after a resize each worker starts
  its new shard at the beginning of the epoch rank 0 was in (as NumericProgram::resized);
- the gradient: the mean loss of the worker's batch (task.loss) differentiated by torch, all
  parameters concatenated in named_parameters order;
- S-SGD: the gradients' sum allreduced, times float32(1 / n), then the local update; SMA and
  AdaSGD's first phase: p <- (1 - a) p + (a sum(p)) (1 / n) in float32, then the local update
  with the local gradient; AdaSGD switches at --change-step with rank 0's model;
- the local update: kfsim's C++ LocalOptimizer itself (kungfu.torch.local), not torch.optim.SGD
  (the same formula, but torch's vectorized kernels may fuse a multiply-add and round
  differently).

Where the worlds cannot agree bit for bit:

- the order in which an allreduce folds the workers' values follows the collective strategy's
  graph: with 2 workers any order gives the same sum, with more the two worlds must use the
  same strategy (kfrun's KUNGFU_STRATEGY / -strategy and the scenario's `strategy`), and even
  then a graph that differs per chunk may fold differently than kfsim's one flat buffer;
- pair averaging: the peer is drawn from Python's random here, from std::mt19937_64 in kfsim,
  and which saved model a peer holds depends on timing; the runs agree in law, not in bits;
- the forward and backward passes are torch's in both worlds, but torch's CPU kernels may choose
  different algorithms with a different number of threads (keep --threads the same);
- evaluation (accuracy, test loss) is rank 0's, on the first --limit-test test samples.

A task module that cannot be used (kungfu.torch.task.TaskError) ends every worker with exit
code 2 and the error's message on stderr.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

__all__ = ["main", "parse_args", "OPTIMIZERS"]

#: --optimizer's choices and the kungfu.torch optimizer each runs.
OPTIMIZERS = {"ssgd": "SynchronousSGDOptimizer", "sma": "SynchronousAveragingOptimizer",
              "pair": "PairAveragingOptimizer", "adasgd": "AdaptiveSGDOptimizer"}


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """The command line (see the module's docstring)."""
    ap = argparse.ArgumentParser(prog="python3 -m kungfu.torch.train",
                                 description="Trains a task module under kfrun.")
    ap.add_argument("module", help="the task module: a .py file or an importable module name")
    ap.add_argument("--optimizer", default="ssgd", choices=sorted(OPTIMIZERS))
    ap.add_argument("--local", default="sgd", choices=["sgd", "adam"],
                    help="the local update rule (kfsim's LocalOptimizer)")
    ap.add_argument("--batch", type=int, default=32, help="samples per worker per step")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--alpha", type=float, default=0.1, help="SMA's and AdaSGD's pull")
    ap.add_argument("--change-step", type=int, default=100, help="AdaSGD's switch to S-SGD")
    ap.add_argument("--steps", type=int, default=0, help="stop after N steps (0: no limit)")
    ap.add_argument("--epochs", type=float, default=0,
                    help="stop once the cluster has taken this many passes' worth of samples")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--policy", action="append", default=[],
                    help="a policy spec, e.g. adaptive_batch_size:interval=10 (repeatable)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    ap.add_argument("--eval-every", type=int, default=0, help="evaluate every N steps (0: never)")
    ap.add_argument("--limit-train", type=int, default=0, help="use the first N training samples")
    ap.add_argument("--limit-test", type=int, default=0, help="use the first N test samples")
    ap.add_argument("--out", type=Path, help="write steps.csv and final.json here (rank 0)")
    ap.add_argument("--save-params", action="store_true",
                    help="with --out: params.npy (rank 0) and params-rank<R>.npy (every rank)")
    a = ap.parse_args(argv)
    if a.batch < 1:
        ap.error("--batch must be at least 1")
    if a.steps < 0 or a.epochs < 0 or (a.steps == 0 and a.epochs == 0):
        ap.error("give --steps N or --epochs E (positive)")
    if a.threads < 1:
        ap.error("--threads must be at least 1")
    if a.save_params and a.out is None:
        ap.error("--save-params needs --out")
    return a


def _flat(model: torch.nn.Module) -> np.ndarray:
    return torch.cat([p.detach().reshape(-1) for _, p in model.named_parameters()]).numpy().copy()


@torch.no_grad()
def evaluate(model: torch.nn.Module, task: Any, x: torch.Tensor,
             y: torch.Tensor, chunk: int = 1000) -> Tuple[float, float]:
    """(accuracy, mean loss) of the model on (x, y)."""
    model.eval()
    correct, loss = 0, 0.0
    for i in range(0, len(y), chunk):
        out = model(x[i:i + chunk])
        correct += int((out.argmax(1) == y[i:i + chunk]).sum())
        loss += float(task.loss(out, y[i:i + chunk])) * len(out)
    model.train()
    return correct / len(y), loss / len(y)


class _Log:
    """Rank 0's records: steps.csv rows and JSON lines."""

    FIELDS = ["step", "samples", "loss", "accuracy", "test_loss", "batch", "cluster_size", "lr",
              "wall_s"]

    def __init__(self, out: Optional[Path], rank: int, start: float) -> None:
        self.rank, self.start = rank, start
        self.file = None
        if out is not None and rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            self.file = open(out / "steps.csv", "a", newline="")
            if self.file.tell() == 0:
                csv.writer(self.file).writerow(self.FIELDS)

    def wall(self) -> float:
        return round(time.perf_counter() - self.start, 3)

    def row(self, **fields: Any) -> None:
        if self.file is not None:
            csv.writer(self.file).writerow(["" if fields.get(k) is None else fields[k]
                                            for k in self.FIELDS])
            self.file.flush()

    def line(self, **fields: Any) -> None:
        if self.rank == 0:
            print(json.dumps(fields), flush=True)


def _policy_needs_gns(policies: Sequence[str]) -> bool:
    return any(p.split(":", 1)[0].strip() == "adaptive_batch_size" for p in policies)


def train(a: argparse.Namespace) -> int:
    """Runs the training the arguments describe on this worker; returns the exit code."""
    import kungfu
    import kungfu.torch as kt
    from kungfu import _core
    from kungfu.torch import elastic
    from kungfu.torch.local import LocalOptimizer
    from kungfu.torch.task import load

    start = time.perf_counter()
    torch.set_num_threads(a.threads)
    task = load(a.module)
    model = task.model(a.seed)
    train_x, train_y = task.data(True)
    if a.limit_train:
        train_x, train_y = train_x[:a.limit_train], train_y[:a.limit_train]
    kungfu.init()
    rank = kungfu.rank()
    test: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
    if a.eval_every and rank == 0:
        test = task.data(False)
        if a.limit_test:
            test = (test[0][:a.limit_test], test[1][:a.limit_test])

    needs_gns = _policy_needs_gns(a.policy)
    if needs_gns and a.optimizer != "ssgd":
        raise SystemExit(f"kungfu.torch.train: --policy adaptive_batch_size needs the gradient "
                         f"noise scale, which S-SGD measures: use --optimizer ssgd, not "
                         f"{a.optimizer}")
    local = LocalOptimizer(model.parameters(), lr=a.lr, name=a.local, momentum=a.momentum)
    named = list(model.named_parameters())
    monitors: List[Any] = [kt.GradientNoiseScale(batch_size=a.batch)] if needs_gns else []
    if a.optimizer == "ssgd":
        opt = kt.SynchronousSGDOptimizer(local, named_parameters=named, op="sum",
                                         monitors=monitors)
    elif a.optimizer == "sma":
        opt = kt.SynchronousAveragingOptimizer(local, named_parameters=named, alpha=a.alpha)
    elif a.optimizer == "pair":
        opt = kt.PairAveragingOptimizer(local, named_parameters=named, seed=a.seed)
    else:
        opt = kt.AdaptiveSGDOptimizer(local, named_parameters=named, alpha=a.alpha,
                                      change_step=a.change_step)
    runner = (kt.PolicyRunner(list(a.policy), batch_size=a.batch, optimizer=opt,
                              monitors=monitors, total_steps=a.steps)
              if a.policy else None)
    state = elastic.State(model, opt, step=0, samples=0, epoch=0, batch=a.batch, lr=a.lr)
    if runner is not None:
        state.register(runner)
        runner.elastic_state = state
    log = _Log(a.out, rank, start)
    changes: List[List[int]] = []
    total = a.epochs * len(train_y)

    def done(s: elastic.State) -> bool:
        return ((a.steps and s.step >= a.steps) or (a.epochs and s.samples >= total)
                or (runner is not None and runner.stopped))

    @elastic.run
    def loop(s: elastic.State) -> int:
        n, r = kungfu.size(), kungfu.rank()
        if a.optimizer == "ssgd":
            opt.grad_scale = float(np.float32(1) / np.float32(n))  # kfsim: sum x (1.0f / n)
        # kfsim's sampler: after a resize, the new shard from the start of rank 0's epoch.
        fresh = _core.ShardSampler(len(train_y), r, n, a.seed)
        sampler = _core.ShardSampler(len(train_y), r, n, a.seed, int(s.epoch) * fresh.shard_size)
        if runner is not None and s.step == 0:
            runner.before_train()
        while not done(s):
            batch = runner.batch_size if runner is not None else a.batch
            if runner is not None:
                runner.before_step()
            idx = torch.as_tensor(sampler.next_batch(batch), dtype=torch.int64)
            opt.zero_grad(set_to_none=False)
            out = model(train_x[idx])
            loss = task.loss(out, train_y[idx])
            loss.backward()
            opt.step()
            step = s.step
            s.step = step + 1
            s.samples = s.samples + batch * n
            s.epoch = sampler.epoch
            row: Dict[str, Any] = {"step": step, "samples": s.samples,
                                   "loss": round(float(loss), 6), "batch": batch,
                                   "cluster_size": n, "lr": opt.param_groups[0]["lr"]}
            if test is not None and (step + 1) % a.eval_every == 0:
                accuracy, test_loss = evaluate(model, task, *test)
                row.update(accuracy=round(accuracy, 6), test_loss=round(test_loss, 6))
                log.line(event="eval", **row, wall_s=log.wall())
            log.row(**row, wall_s=log.wall())
            if runner is not None:
                # May raise ClusterResized / WorkerDetached (a resize): elastic.run syncs.
                metrics = {"gns": monitors[0].noise_scale} if needs_gns else {}
                for action in runner.after_step(metrics):
                    if isinstance(action, kt.SetBatchSize):
                        changes.append([step + 1, batch, action.per_worker])
                        log.line(event="batch", step=step + 1, **{"from": batch},
                                 to=action.per_worker, lr=opt.param_groups[0]["lr"])
        return int(s.step)

    steps = loop(state)
    if steps is None:  # this worker left the cluster
        return 0
    if runner is not None:
        runner.after_train()
    flat = _flat(model)
    agreed = kungfu.consensus(flat, name="kungfu.train/model")
    history = json.dumps(changes).encode()
    batches_agreed = kungfu.consensus(np.frombuffer(history, dtype=np.uint8).copy(),
                                      name="kungfu.train/batches")
    final: Dict[str, Any] = {"final": True, "module": a.module, "optimizer": a.optimizer,
                             "workers": kungfu.size(), "steps": steps, "samples": state.samples,
                             "batch": runner.batch_size if runner is not None else a.batch,
                             "lr": opt.param_groups[0]["lr"], "batch_changes": changes,
                             "agreed": bool(agreed), "batches_agreed": bool(batches_agreed),
                             "parameters": int(flat.size)}
    if test is not None:
        final["accuracy"], final["test_loss"] = (round(v, 6) for v in evaluate(model, task, *test))
    final["wall_s"] = log.wall()
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        if a.save_params:
            np.save(a.out / f"params-rank{kungfu.rank()}.npy", flat)
        if kungfu.rank() == 0:
            if a.save_params:
                np.save(a.out / "params.npy", flat)
            (a.out / "final.json").write_text(json.dumps(final, indent=1) + "\n")
    log.line(**final)
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command: exit code 0, or 2 for a bad command line or an unusable task module."""
    a = parse_args(argv)
    from kungfu.torch.task import TaskError
    try:
        return train(a)
    except TaskError as e:
        print(f"kungfu.torch.train: {e}", file=sys.stderr, flush=True)
        return 2
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr, flush=True)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
