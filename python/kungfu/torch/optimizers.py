"""KungFu's distributed optimizers for PyTorch, each wrapping any torch.optim.Optimizer.

The wrapper is an instance of a subclass of the optimizer's own class (as Horovod's
DistributedOptimizer is), sharing its parameter groups and state, so learning-rate schedulers
and checkpoints work unchanged. Collectives are named after the parameters (from
`named_parameters`, or "param.<i>" in parameter order), so workers match them by name, not by
the order in which they start.

- SynchronousSGDOptimizer (S-SGD; also DistributedOptimizer): each parameter's gradient is
  allreduced (averaged) as soon as the backward pass has produced it, from a hook on its gradient
  accumulator, so communication overlaps the rest of the backward pass; step() waits for them,
  then applies the optimizer. One backward pass per step.
- SynchronousAveragingOptimizer (SMA): step() applies the optimizer to the local gradient after
  pulling the model towards the workers' average: x <- (1 - alpha) x + alpha mean(x).
- AdaptiveSGDOptimizer (AdaSGD): SMA until `change_step`, then every worker takes rank 0's model
  and trains with S-SGD.
- PairAveragingOptimizer (AD-PSGD, asynchronous decentralized): step() fetches the model a random
  peer last saved in its peer-to-peer store (kungfu.request), averages with it, applies the
  optimizer to the local gradient, and saves the result for others (kungfu.save). No worker waits
  for all the others; a peer that has saved nothing yet is skipped that step.
"""

from __future__ import annotations

import random
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import torch

import kungfu
from kungfu.torch.monitors import GradientNoiseScale, GradientVariance

NamedParameters = Optional[Iterable[Tuple[str, torch.nn.Parameter]]]


def _names(optimizer: torch.optim.Optimizer, named_parameters: NamedParameters,
           call: str) -> Dict[torch.Tensor, str]:
    """Every parameter of the optimizer with its collective name."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if named_parameters is None:
        return {p: f"param.{i}" for i, p in enumerate(params)}
    names = {}
    for name, p in named_parameters:
        if p in names:
            raise ValueError(f"{call}: parameter {name} is listed twice")
        names[p] = name
    missing = [i for i, p in enumerate(params) if p not in names]
    if missing:
        raise ValueError(f"{call}: the optimizer's parameters {missing} are not in "
                         "named_parameters (pass model.named_parameters() of the same model)")
    return {p: names[p] for p in params}


def _wrap(cls: type, optimizer: torch.optim.Optimizer, **kw: Any) -> torch.optim.Optimizer:
    """An instance of `cls`'s behaviour over `optimizer`'s class, groups, defaults and state."""
    body = {k: v for k, v in cls.__dict__.items() if k not in ("__dict__", "__weakref__")}
    klass = type(optimizer.__class__.__name__, (optimizer.__class__,), body)
    wrapped = klass.__new__(klass)
    wrapped.__dict__.update(optimizer.__dict__)  # the same param_groups, defaults and state
    wrapped._kungfu_init(**kw)
    return wrapped


def _f32_factors(alpha: float, n: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, 1 - a, 1 / n) as float32 scalars computed in float32, as kfsim's C++ does."""
    a = torch.tensor(alpha, dtype=torch.float32)
    return a, torch.tensor(1.0, dtype=torch.float32) - a, (
        torch.tensor(1.0, dtype=torch.float32) / torch.tensor(float(n), dtype=torch.float32))


class _SynchronousSGD:
    def _kungfu_init(self, named_parameters: NamedParameters, op: str,
                     monitors: Sequence[Any]) -> None:
        if op not in ("avg", "sum"):
            raise ValueError(f"kungfu.torch.SynchronousSGDOptimizer: op must be avg or sum, "
                             f"got {op!r}")
        self._kungfu_names = _names(self, named_parameters, "SynchronousSGDOptimizer")
        self._kungfu_op = op
        self._kungfu_handles: Dict[torch.Tensor, kungfu.Handle] = {}
        self._kungfu_hooks: List[Any] = []
        self._kungfu_gns = [m for m in monitors if isinstance(m, GradientNoiseScale)]
        self._kungfu_variance = [m for m in monitors if isinstance(m, GradientVariance)]
        unknown = [m for m in monitors if not isinstance(m, (GradientNoiseScale, GradientVariance))]
        if unknown:
            raise TypeError(f"kungfu.torch.SynchronousSGDOptimizer: unknown monitor {unknown[0]!r}")
        self._kungfu_local_norm2 = 0.0
        self._kungfu_squares: Dict[torch.Tensor, torch.Tensor] = {}
        for p in self._kungfu_names:
            if p.requires_grad:
                # The gradient accumulator's hook runs once p.grad holds this pass's gradient.
                with torch.enable_grad():
                    accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
                accumulator.register_hook(self._kungfu_hook(p))
                self._kungfu_hooks.append(accumulator)

    def _kungfu_hook(self, p: torch.Tensor):
        def hook(*_):
            if p in self._kungfu_handles:
                raise RuntimeError(
                    f"kungfu.torch.SynchronousSGDOptimizer: a second backward pass before step() "
                    f"(parameter {self._kungfu_names[p]}); call step() after each backward pass")
            self._kungfu_start(p)
        return hook

    def _kungfu_start(self, p: torch.Tensor) -> None:
        if p.grad is None:
            p.grad = torch.zeros_like(p)  # unused this step: its peers still send theirs
        if self._kungfu_gns:  # this worker's gradient, before it is averaged in place
            self._kungfu_local_norm2 += float(p.grad.detach().float().square().sum())
        if self._kungfu_variance:
            self._kungfu_squares[p] = p.grad.detach().float().square()
        self._kungfu_handles[p] = kungfu.allreduce_async(
            p.grad, self._kungfu_op, inplace=True, name=f"kungfu.grad/{self._kungfu_names[p]}")

    def synchronize(self) -> None:
        """Waits for every gradient's allreduce (starting those no hook started)."""
        for p in self._kungfu_names:
            if p.requires_grad and p not in self._kungfu_handles:
                self._kungfu_start(p)
        for h in self._kungfu_handles.values():
            h.wait()
        self._kungfu_handles.clear()
        self._kungfu_observe()

    def _kungfu_observe(self) -> None:
        """The attached monitors, from the local gradients the hooks saw and the averaged ones."""
        if not (self._kungfu_gns or self._kungfu_variance):
            return
        grads = [p.grad for p in self._kungfu_names if p.requires_grad]
        scale = 1.0 if self._kungfu_op == "avg" else 1.0 / kungfu.size()
        average = torch.cat([g.detach().reshape(-1).float() for g in grads]) * scale
        for m in self._kungfu_gns:
            m.observe(self._kungfu_local_norm2, float(average.square().sum()))
        if self._kungfu_variance:
            squares = torch.cat([self._kungfu_squares[p].reshape(-1)
                                 for p in self._kungfu_names if p.requires_grad])
            square_sum = kungfu.allreduce(squares, "sum", name="kungfu.monitor/squares")
            for m in self._kungfu_variance:
                m.observe_sums(average * kungfu.size(), square_sum)
        self._kungfu_local_norm2 = 0.0
        self._kungfu_squares.clear()

    def step(self, closure=None):
        self.synchronize()
        return super(self.__class__, self).step(closure)


class _SynchronousAveraging:
    def _kungfu_init(self, named_parameters: NamedParameters, alpha: float) -> None:
        if not 0 < alpha <= 1:
            raise ValueError(f"kungfu.torch.SynchronousAveragingOptimizer: alpha must be in "
                             f"(0, 1], got {alpha}")
        self._kungfu_names = _names(self, named_parameters, "SynchronousAveragingOptimizer")
        self._kungfu_alpha = alpha

    def average_models(self) -> None:
        """x <- (1 - alpha) x + alpha mean(x) for every parameter, over the workers: in float32,
        as kfsim computes it (workloads/numeric_program.cc), (1 - a) x + (a sum(x)) (1 / n)."""
        with torch.no_grad():
            handles = [(p, kungfu.allreduce_async(p.data, "sum",
                                                  name=f"kungfu.model/{name}"))
                       for p, name in self._kungfu_names.items()]
            a, keep, inv = _f32_factors(self._kungfu_alpha, kungfu.size())
            for p, h in handles:
                total = h.wait()  # before p changes: the allreduce reads p until it completes
                p.data.copy_(p.data * keep.to(p.dtype) + total * a.to(p.dtype) * inv.to(p.dtype))

    def step(self, closure=None):
        self.average_models()
        return super(self.__class__, self).step(closure)


class _AdaptiveSGD:
    def _kungfu_init(self, named_parameters: NamedParameters, alpha: float,
                     change_step: int) -> None:
        named = list(named_parameters) if named_parameters is not None else None
        _SynchronousAveraging._kungfu_init(self, named, alpha)
        self._kungfu_change_step = change_step
        self._kungfu_step = 0
        self._kungfu_op = "avg"
        self._kungfu_handles = {}

    average_models = _SynchronousAveraging.average_models

    def step(self, closure=None):
        step = self._kungfu_step
        self._kungfu_step += 1
        if step < self._kungfu_change_step:
            self.average_models()
        else:
            if step == self._kungfu_change_step:  # the switch: everyone takes rank 0's model
                for p, name in self._kungfu_names.items():
                    kungfu.broadcast(p.data, 0, inplace=True, name=f"kungfu.switch/{name}")
            for p, name in self._kungfu_names.items():
                if p.grad is not None:
                    self._kungfu_handles[p] = kungfu.allreduce_async(
                        p.grad, "sum", inplace=True, name=f"kungfu.grad/{name}")
            inv = _f32_factors(1.0, kungfu.size())[2]
            for p, h in self._kungfu_handles.items():
                h.wait()
                p.grad.mul_(inv.to(p.grad.dtype))  # sum x (1 / n) in float32, as kfsim's S-SGD
            self._kungfu_handles.clear()
        return super(self.__class__, self).step(closure)

    def state_dict(self):
        """The wrapped optimizer's state, plus the step count that decides the switch (so a
        worker that joins after a resize switches at the same step as the others)."""
        state = super(self.__class__, self).state_dict()
        state["kungfu"] = {"step": self._kungfu_step}
        return state

    def load_state_dict(self, state_dict):
        extra = state_dict.get("kungfu")
        super(self.__class__, self).load_state_dict(
            {k: v for k, v in state_dict.items() if k != "kungfu"})
        if extra is not None:
            self._kungfu_step = int(extra["step"])


class _PairAveraging:
    _KEY = "kungfu.model"

    def _kungfu_init(self, named_parameters: NamedParameters, seed: int) -> None:
        self._kungfu_names = _names(self, named_parameters, "PairAveragingOptimizer")
        self._kungfu_rng = random.Random(seed * 7919 + kungfu.rank())

    def _kungfu_flat(self) -> torch.Tensor:
        return torch.cat([p.detach().reshape(-1).float() for p in self._kungfu_names])

    def average_with_peer(self) -> Optional[int]:
        """x <- (x + a random peer's saved x) / 2; returns the peer, or None when it had none."""
        n, r = kungfu.size(), kungfu.rank()
        if n < 2:
            return None
        peer = self._kungfu_rng.randrange(n - 1)
        peer += peer >= r
        theirs = kungfu.request(peer, self._KEY, like=torch.zeros(
            sum(p.numel() for p in self._kungfu_names)))
        if theirs is None:
            return None
        offset = 0
        with torch.no_grad():
            for p in self._kungfu_names:
                part = theirs[offset:offset + p.numel()].view_as(p).to(p.dtype)
                p.data.add_(part).mul_(0.5)
                offset += p.numel()
        return peer

    def step(self, closure=None):
        self.average_with_peer()
        result = super(self.__class__, self).step(closure)
        kungfu.save(self._KEY, self._kungfu_flat())
        return result


def SynchronousSGDOptimizer(optimizer: torch.optim.Optimizer,
                            named_parameters: NamedParameters = None, op: str = "avg",
                            monitors: Sequence[Any] = ()) -> torch.optim.Optimizer:
    """Synchronous SGD: gradients averaged (or summed) over the workers before each step.
    `monitors`: GradientNoiseScale / GradientVariance instances updated at every step."""
    return _wrap(_SynchronousSGD, optimizer, named_parameters=named_parameters, op=op,
                 monitors=tuple(monitors))


DistributedOptimizer = SynchronousSGDOptimizer


def SynchronousAveragingOptimizer(optimizer: torch.optim.Optimizer,
                                  named_parameters: NamedParameters = None,
                                  alpha: float = 0.1) -> torch.optim.Optimizer:
    """Synchronous model averaging (SMA): the model pulled towards the workers' mean each step."""
    return _wrap(_SynchronousAveraging, optimizer, named_parameters=named_parameters, alpha=alpha)


def PairAveragingOptimizer(optimizer: torch.optim.Optimizer,
                           named_parameters: NamedParameters = None,
                           seed: int = 0) -> torch.optim.Optimizer:
    """Pair averaging (AD-PSGD): each step averages with one random peer's last saved model."""
    return _wrap(_PairAveraging, optimizer, named_parameters=named_parameters, seed=seed)


def AdaptiveSGDOptimizer(optimizer: torch.optim.Optimizer,
                         named_parameters: NamedParameters = None, alpha: float = 0.1,
                         change_step: int = 100) -> torch.optim.Optimizer:
    """AdaSGD: SMA for the first `change_step` steps, then S-SGD from rank 0's model."""
    return _wrap(_AdaptiveSGD, optimizer, named_parameters=named_parameters, alpha=alpha,
                 change_step=change_step)
