"""A tiny task module (kungfu.torch.task) for fast tests: an MLP (16 -> 32 -> 4) on a fixed
Gaussian mixture of 4 classes, 512 training and 128 test samples."""

from typing import Tuple

import torch
import torch.nn as nn


def model() -> nn.Module:
    """16 inputs, 32 ReLU units, 4 logits: 676 parameters."""
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def data(train: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """The mixture's training or test samples (float32 (N, 16)) and labels (int64 (N,))."""
    g = torch.Generator().manual_seed(7)
    means = torch.randn(4, 16, generator=g) * 0.5
    g.manual_seed(11 if train else 13)
    n = 512 if train else 128
    y = torch.randint(0, 4, (n,), generator=g)
    x = means[y] + torch.randn(n, 16, generator=g)
    return x.float(), y
