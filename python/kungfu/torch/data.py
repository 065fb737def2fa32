"""Data for examples and tests: the real Fashion-MNIST (Debian's dataset-fashion-mnist, IDX files
under /usr/share/datasets/fashion-mnist) and a sampler that gives each worker its shard.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Iterator, Optional, Tuple

import numpy as np
import torch

import kungfu

FASHION_MNIST_DIR = Path(os.environ.get("KF_FASHION_MNIST", "/usr/share/datasets/fashion-mnist"))


def _idx(path: Path) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file")
    dims = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def fashion_mnist(train: bool = True,
                  directory: Optional[Path] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(images as float32 in [0, 1], shape (N, 1, 28, 28); labels as int64): 60,000 for training,
    10,000 for testing."""
    d = Path(directory or FASHION_MNIST_DIR)
    prefix = "train" if train else "t10k"
    found = {}
    for kind, name in (("images", f"{prefix}-images-idx3-ubyte"), ("labels", f"{prefix}-labels-idx1-ubyte")):
        for candidate in (d / f"{name}.gz", d / name):
            if candidate.exists():
                found[kind] = candidate
                break
        else:
            raise FileNotFoundError(f"Fashion-MNIST: no {name}[.gz] in {d} "
                                    "(apt-get install dataset-fashion-mnist, or set KF_FASHION_MNIST)")
    images = torch.from_numpy(_idx(found["images"]).astype(np.float32) / 255.0).unsqueeze(1)
    labels = torch.from_numpy(_idx(found["labels"]).astype(np.int64))
    return images, labels


class ShardSampler:
    """The indices of this worker's shard of a data set, reshuffled every epoch from one seed, so
    that the workers' shards never overlap and together cover the set (the last indices that do
    not fill every worker's share are left out of that epoch). `set_epoch` as with torch's
    DistributedSampler; rank and size default to kungfu's."""

    def __init__(self, length: int, seed: int = 0, rank: Optional[int] = None,
                 size: Optional[int] = None):
        self.length, self.seed = length, seed
        self.rank = kungfu.rank() if rank is None else rank
        self.size = kungfu.size() if size is None else size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.length // self.size

    def __iter__(self) -> Iterator[int]:
        order = torch.randperm(self.length, generator=torch.Generator().manual_seed(
            self.seed * 1_000_003 + self.epoch))
        share = self.length // self.size
        return iter(order[self.rank * share:(self.rank + 1) * share].tolist())
