"""A training task (kungfu.torch.task): the CNN of examples/fashion_mnist.py on the real
Fashion-MNIST, for both worlds:

    kfrun -np 4 /usr/bin/python3 -m kungfu.torch.train examples/fashion_cnn.py --optimizer sma
    kfsim scenarios/adaptive-batch-fashion.yaml      # workload: {torch: {module: ...}}

The module only says what to train; each world shards, orders and batches the samples itself,
from the run's seed.
"""

from typing import Tuple

import torch
import torch.nn as nn

from kungfu.torch.data import fashion_mnist


def model() -> nn.Module:
    """Two 5x5 convolutions (16 and 32 channels, each ReLU and 2x2 max-pool), then 128 ReLU units
    and 10 logits: 215,370 parameters."""
    return nn.Sequential(nn.Conv2d(1, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def data(train: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """60,000 training or 10,000 test images as (N, 1, 28, 28) floats in [0, 1], and labels."""
    return fashion_mnist(train=train)
