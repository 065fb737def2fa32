"""Gradient monitors on the runtime's estimators (workloads/gradient_monitors.h), the same ones
kfsim and kftrain use.

GradientNoiseScale (McCandlish et al., "An Empirical Model of Large-Batch Training"): from the
squared norm of this worker's gradient (its batch B) and of the workers' average (batch n x B),
the critical batch size B_noise, smoothed by an exponential moving average. GradientVariance:
sum_i (E[g_i^2] - E[g_i]^2) over the workers' gradients.

Attach either to a SynchronousSGDOptimizer (`monitors=[...]`): the optimizer measures this
worker's gradient in its hooks, before the allreduce, so the noise scale costs no extra
communication (the variance one allreduce of the squares). Or call measure(parameters) after
backward() with any other optimizer: one allreduce of the gradients (and of their squares).
"""

from __future__ import annotations

from typing import Iterable, Optional

import torch

import kungfu
from kungfu import _core


def _flat(tensors: Iterable[torch.Tensor]) -> torch.Tensor:
    parts = [t.detach().reshape(-1).to(torch.float32) for t in tensors]
    return torch.cat(parts) if parts else torch.zeros(0)


class GradientNoiseScale:
    """The gradient noise scale B_noise of this worker's gradients; `batch_size` is the batch of
    one worker per step."""

    def __init__(self, batch_size: int, ema: float = 0.9):
        if batch_size <= 0:
            raise ValueError(f"GradientNoiseScale: batch_size must be positive, got {batch_size}")
        self.batch_size = batch_size
        self._estimator = _core.GnsEstimator(ema)

    def observe(self, local_norm2: float, average_norm2: float) -> Optional[float]:
        """One observation from the two squared norms; returns the noise scale once known."""
        n = kungfu.size()
        if n < 2:
            return None
        self._estimator.observe(float(local_norm2), float(average_norm2), float(self.batch_size),
                                float(self.batch_size * n))
        return self.noise_scale

    def measure(self, parameters: Iterable[torch.nn.Parameter],
                name: str = "kungfu.monitor/gns") -> Optional[float]:
        """After backward(), before the step: this worker's gradient against the average."""
        local = _flat(p.grad for p in parameters if p.grad is not None)
        average = kungfu.allreduce(local, "avg", name=name)
        return self.observe(float(local.square().sum()), float(average.square().sum()))

    @property
    def noise_scale(self) -> Optional[float]:
        """B_noise, or None before both moving averages are positive."""
        return self._estimator.noise_scale()


class GradientVariance:
    """The variance of the gradients across workers, summed over the gradient's elements."""

    def __init__(self) -> None:
        self.variance: Optional[float] = None

    def observe_sums(self, grad_sum: torch.Tensor, square_sum: torch.Tensor) -> float:
        """From the workers' sum of gradients and sum of squared gradients."""
        g = grad_sum.detach().to(torch.float32).contiguous().numpy()
        s = square_sum.detach().to(torch.float32).contiguous().numpy()
        self.variance = _core.gradient_variance(g, s, kungfu.size())
        return self.variance

    def measure(self, parameters: Iterable[torch.nn.Parameter],
                name: str = "kungfu.monitor/variance") -> float:
        """After backward(), before the step: one allreduce of the gradients and their squares."""
        local = _flat(p.grad for p in parameters if p.grad is not None)
        both = kungfu.allreduce(torch.cat([local, local.square()]), "sum", name=name)
        return self.observe_sums(both[: local.numel()], both[local.numel():])


__all__ = ["GradientNoiseScale", "GradientVariance"]
