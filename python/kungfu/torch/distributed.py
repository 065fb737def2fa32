"""The torch.distributed backend "kungfu": torch's collectives on KungFu's runtime.

    import kungfu.torch                      # registers the backend
    torch.distributed.init_process_group("kungfu")
    model = torch.nn.parallel.DistributedDataParallel(model)

It takes the usual env:// rendezvous: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which both
torchrun and kfrun set (kfrun puts torch's store next to rank 0's worker ports). The workers'
identity on the runtime comes from the same launcher; kungfu.init() runs if it has not.
Supported on CPU tensors: allreduce (sum, avg, min, max, product), broadcast, reduce, allgather
(and _allgather_base), gather, barrier, each with a Work whose get_future() DDP uses. Other
calls (send / recv, scatter, reduce_scatter, all_to_all) raise an error naming the call.
"""

from __future__ import annotations

import datetime

import torch.distributed as dist

import kungfu

BACKEND = "kungfu"

try:
    from kungfu.torch import _c10d
except ImportError as e:  # a build without libtorch
    _c10d = None
    _why = str(e)


def _create(store, rank: int, size: int, timeout: datetime.timedelta):
    if _c10d is None:
        raise RuntimeError(f"kungfu backend: not built (no libtorch at build time): {_why}")
    kungfu.init(timeout=timeout.total_seconds())
    return _c10d.ProcessGroupKungFu(rank, size)


def register() -> None:
    """Makes "kungfu" a torch.distributed backend (done when kungfu.torch is imported)."""
    if BACKEND.upper() not in getattr(dist.Backend, "_plugins", {}):
        dist.Backend.register_backend(BACKEND, _create)
