"""Upstream KungFu's Python names (kungfu.python), on this runtime.

As upstream, importing this module initialises the runtime unless KUNGFU_NO_AUTO_INIT is set;
workers started by kfrun, torchrun, mpirun or srun find each other as C++ workers do.
"""

from __future__ import annotations

import os
from typing import Optional, Tuple

import numpy as np

import kungfu

__all__ = ["current_rank", "current_cluster_size", "current_local_rank", "current_local_size",
           "run_barrier", "all_reduce_int_max", "resize", "propose_new_size"]


def current_rank() -> int:
    """This worker's rank."""
    return kungfu.rank()


def current_cluster_size() -> int:
    """The number of workers."""
    return kungfu.size()


def current_local_rank() -> int:
    """This worker's index among the workers on its host."""
    return kungfu.local_rank()


def current_local_size() -> int:
    """The number of workers on this host."""
    return kungfu.local_size()


def run_barrier() -> None:
    """Returns once every worker has called it."""
    kungfu.barrier()


def all_reduce_int_max(x: int) -> int:
    """The largest of every worker's `x`."""
    return int(kungfu.allreduce(np.array([x], dtype=np.int64), "max")[0])


def resize(n: Optional[int] = None) -> Tuple[bool, bool]:
    """(changed, detached): every worker resizes the cluster to `n`, or to the config server's
    proposal when `n` is None (upstream's resize_cluster_from_url). See kungfu.resize."""
    return kungfu.resize(n)


def propose_new_size(n: int) -> None:
    """Stores a proposal for `n` workers on the config server; applied at the next resize()."""
    kungfu.propose_new_size(n)


if not os.environ.get("KUNGFU_NO_AUTO_INIT"):
    kungfu.init()
