"""A tiny training task (kungfu.torch.task) for kfsim's workload.torch tests: 4 classes of
Gaussian blobs in 8 features, given as (N, 2, 4) inputs so that kfsim's rows are reshaped back,
and a two-layer MLP of 180 parameters. It trains in milliseconds a step.

TINY_BN=1 in the environment adds a BatchNorm1d (a model with buffers)."""

import os
from typing import Tuple

import torch
import torch.nn as nn


def model() -> nn.Module:
    layers = [nn.Flatten(), nn.Linear(8, 16)]
    if os.environ.get("TINY_BN") == "1":
        layers.append(nn.BatchNorm1d(16))
    return nn.Sequential(*layers, nn.ReLU(), nn.Linear(16, 4))


def data(train: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    centres = torch.randn(4, 8, generator=g) * 2.0
    n = 256 if train else 64
    g.manual_seed(11 if train else 13)
    labels = torch.arange(n, dtype=torch.int64) % 4
    x = centres[labels] + torch.randn(n, 8, generator=g)
    return x.view(n, 2, 4).contiguous(), labels
