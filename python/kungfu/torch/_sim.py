"""kfsim's Python half of `workload: {torch: {module: ...}}` (its C++ half: sim/torch/torch_task.cc,
which embeds this interpreter). Not an API: the embedding calls these, one simulated worker's
step at a time, on numpy arrays that are views of kfsim's own memory (no copies on the way in).

- SimTask(spec, train, test) loads the task module (kungfu.torch.task) and its data, once per
  process: inputs flattened to rows of float32, labels int64, the first `train` / `test` samples.
- SimTask.replica(seed) builds task.model() after torch.manual_seed(seed): a Replica.
- Replica.step(x, y, params, grad) loads the flat parameters, runs the batch forward and
  backward in training mode, writes the flat gradient and returns the loss.
- Replica.evaluate(x, y, params) is the mean loss and the accuracy over a set, in eval mode.
- Replica.clone() is a replica of its own for another worker (models with buffers).

The flat parameter vector is the model's trainable parameters (named_parameters() order, those
with requires_grad) one after the other, each flattened. Each replica keeps its parameters and
gradients as views of one flat tensor, so loading and storing them is one copy each.

Determinism: one intra-op thread and torch.use_deterministic_algorithms(True); every replica is
built right after torch.manual_seed(seed). What the model draws while training (dropout) comes
from torch's global generator, in the simulation's (deterministic) order of steps.
"""

from __future__ import annotations

import copy
from typing import List, Tuple

import numpy as np
import torch

from kungfu.torch.task import TaskError, _last_line, load

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

EVAL_CHUNK = 1024  # test samples per forward pass in evaluate()


class SimTask:
    """A task module and its data, as kfsim sees them."""

    def __init__(self, spec: str, train: int, test: int):
        self.task = load(spec)
        self.name = spec
        self.train_x, self.train_y = self._data(True, train)
        self.test_x, self.test_y = self._data(False, test)
        if self.train_x.shape[1:] != self.test_x.shape[1:]:
            raise TaskError(f"task module {spec}: data(): training inputs are "
                            f"{tuple(self.train_x.shape[1:])} per sample, test inputs "
                            f"{tuple(self.test_x.shape[1:])}")
        self.shape = tuple(self.train_x.shape[1:])  # one sample's input
        self.classes = int(max(int(self.train_y.max()), int(self.test_y.max()))) + 1

    def _data(self, train: bool, limit: int) -> Tuple[torch.Tensor, torch.Tensor]:
        x, y = self.task.data(train)
        if limit > 0:
            x, y = x[:limit], y[:limit]
        return x.contiguous(), y.contiguous()

    def rows(self, train: bool) -> Tuple[np.ndarray, np.ndarray]:
        """(inputs as (N, features) float32, labels as (N,) int32), for kfsim's Dataset."""
        x, y = (self.train_x, self.train_y) if train else (self.test_x, self.test_y)
        return x.reshape(x.shape[0], -1).numpy(), y.to(torch.int32).numpy()

    def drop_data(self) -> None:
        """kfsim keeps its own copy of the data: this one can go."""
        del self.train_x, self.train_y, self.test_x, self.test_y

    def replica(self, seed: int) -> "Replica":
        return Replica(self, self.task.model(seed))

    def profile(self) -> str:
        p = self.task.profile()
        return "" if p is None else str(p.resolve())


class Replica:
    """One model instance: its parameters and gradients views of one flat tensor each."""

    def __init__(self, sim: SimTask, model: torch.nn.Module):
        self.sim = sim
        self.model = model
        self.names: List[str] = []
        self.params: List[torch.nn.Parameter] = []
        for name, p in model.named_parameters():
            if p.requires_grad:
                self.names.append(name)
                self.params.append(p)
        if any(p.dtype != torch.float32 for p in self.params):
            raise TaskError(f"task module {sim.name}: model() has parameters that are not "
                            "torch.float32")
        self.numels = [p.numel() for p in self.params]
        total = sum(self.numels)
        self.flat = torch.empty(total, dtype=torch.float32)
        self.flat_grad = torch.zeros(total, dtype=torch.float32)
        offset = 0
        with torch.no_grad():
            for p, n in zip(self.params, self.numels):
                self.flat[offset:offset + n].copy_(p.reshape(-1))
                p.data = self.flat[offset:offset + n].view_as(p)
                # Backward accumulates into an existing .grad in place: into flat_grad.
                p.grad = self.flat_grad[offset:offset + n].view_as(p)
                offset += n
        self.has_buffers = any(True for _ in model.buffers())

    def tensors(self) -> List[Tuple[str, int]]:
        return list(zip(self.names, self.numels))

    def parameters(self) -> np.ndarray:
        return self.flat.numpy().copy()

    def clone(self) -> "Replica":
        return Replica(self.sim, copy.deepcopy(self.model))

    def _forward(self, x: torch.Tensor, batch: int) -> torch.Tensor:
        try:
            out = self.model(x)
        except Exception as e:  # noqa: BLE001 - reported with the module's name
            raise TaskError(f"task module {self.sim.name}: the model's forward raised: "
                            f"{_last_line(e)}") from e
        if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != batch \
                or out.shape[1] < self.sim.classes:
            got = (f"shape {tuple(out.shape)}" if isinstance(out, torch.Tensor)
                   else type(out).__name__)
            raise TaskError(f"task module {self.sim.name}: model() output for a batch of "
                            f"{batch} has {got}; expected ({batch}, C) logits with C >= "
                            f"{self.sim.classes} classes")
        return out

    def step(self, x: np.ndarray, y: np.ndarray, params: np.ndarray, grad: np.ndarray) -> float:
        """The batch's mean loss; its gradient written into `grad` (flat, as `params`)."""
        self.flat.copy_(torch.from_numpy(params))
        self.flat_grad.zero_()
        self.model.train()
        batch = y.shape[0]
        out = self._forward(torch.from_numpy(x).view((batch,) + self.sim.shape), batch)
        loss = self.sim.task.loss(out, torch.from_numpy(y))
        try:
            loss.backward()
        except Exception as e:  # noqa: BLE001
            raise TaskError(f"task module {self.sim.name}: backward of loss() raised: "
                            f"{_last_line(e)}") from e
        torch.from_numpy(grad).copy_(self.flat_grad)
        return float(loss)

    def evaluate(self, x: np.ndarray, y: np.ndarray, params: np.ndarray) -> Tuple[float, float]:
        """(mean loss, accuracy) over the rows of x, in eval mode, EVAL_CHUNK samples a pass."""
        self.flat.copy_(torch.from_numpy(params))
        self.model.eval()
        xs, ys = torch.from_numpy(x), torch.from_numpy(y)
        n = ys.shape[0]
        loss_sum, correct = 0.0, 0
        with torch.no_grad():
            for begin in range(0, n, EVAL_CHUNK):
                xb, yb = xs[begin:begin + EVAL_CHUNK], ys[begin:begin + EVAL_CHUNK]
                b = yb.shape[0]
                out = self._forward(xb.view((b,) + self.sim.shape), b)
                loss_sum += float(self.sim.task.loss(out, yb)) * b
                correct += int((out.argmax(dim=1) == yb).sum())
        return loss_sum / max(n, 1), correct / max(n, 1)
