"""kfsim's local update rules as torch optimizers, so that a model trained under kfrun takes
exactly the steps kfsim's workers take (kungfu.torch.train).

LocalOptimizer runs the C++ kf::LocalOptimizer (workloads/optimizer.h, through kungfu._core) on
one flat float32 vector of the parameters, in parameter order:

    sgd   v <- momentum v + g;  p <- p - lr v          (heavy-ball momentum, PyTorch's form)
    adam  Adam with bias correction (beta1, beta2, epsilon)

torch.optim.SGD with dampening 0 is the same formula, but its vectorized kernels may fuse a
multiply and an add (FMA) and so round differently; this one gives kfsim's bits. `grad_scale`
multiplies the gradient (in float32) before the update: kungfu.torch.train sets it to 1/n with
S-SGD over summed gradients, as kfsim scales its allreduced sum.

It can be wrapped by every kungfu.torch optimizer (SynchronousSGDOptimizer, ...) like any other
torch optimizer, and its state travels in state_dict() (kungfu.torch.elastic syncs it).
"""

from __future__ import annotations

from typing import Iterable, List

import numpy as np
import torch

from kungfu import _core

__all__ = ["LocalOptimizer"]

_STATE = "kungfu_local"


class LocalOptimizer(torch.optim.Optimizer):
    """kfsim's local optimizer (sgd or adam) over `params` (one parameter group)."""

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, name: str = "sgd",
                 momentum: float = 0.9, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8) -> None:
        super().__init__(params, {"lr": lr})
        if len(self.param_groups) != 1:
            raise ValueError("kungfu.torch.LocalOptimizer: one parameter group only")
        plist = self._params()
        for p in plist:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise ValueError("kungfu.torch.LocalOptimizer: float32 CPU parameters only, got "
                                 f"{p.dtype} on {p.device}")
        count = sum(p.numel() for p in plist)
        try:
            self._kungfu_local = _core.LocalOptimizer(name, count, momentum, beta1, beta2,
                                                      epsilon)
        except ValueError as e:
            raise ValueError(f"kungfu.torch.LocalOptimizer: {e}") from None
        self.grad_scale = 1.0
        self._bind_state()

    def _params(self) -> List[torch.nn.Parameter]:
        return [p for group in self.param_groups for p in group["params"]]

    def _bind_state(self) -> None:
        # The C++ optimizer's own state, seen as a tensor: state_dict() carries it.
        self.state[self._params()[0]][_STATE] = torch.from_numpy(self._kungfu_local.state())

    @torch.no_grad()
    def step(self, closure=None):  # type: ignore[override]
        """One update of every parameter from its .grad (a missing gradient counts as zero)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        plist = self._params()
        flat = torch.cat([p.detach().reshape(-1) for p in plist]).numpy()
        grad = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).detach()
                          .reshape(-1).float() for p in plist]).numpy()
        if self.grad_scale != 1.0:
            grad *= np.float32(self.grad_scale)
        self._kungfu_local.step(flat, grad, float(self.param_groups[0]["lr"]))
        offset = 0
        for p in plist:
            n = p.numel()
            p.copy_(torch.from_numpy(flat[offset:offset + n]).view_as(p))
            offset += n
        return loss

    def load_state_dict(self, state_dict):  # type: ignore[override]
        super().load_state_dict(state_dict)
        loaded = self.state[self._params()[0]].get(_STATE)
        own = self._kungfu_local.state()
        if loaded is not None:
            own[:] = loaded.detach().reshape(-1).float().numpy()
        self._bind_state()
