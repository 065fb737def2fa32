"""kungfu: adaptive distributed training on the KungFu testbed's runtime.

    import kungfu
    kungfu.init()                     # identity from kfrun, torchrun, mpirun or srun
    grads = kungfu.allreduce(grads, op="avg")

Collectives take numpy arrays and torch CPU tensors of every dtype the runtime has; each has an
`_async` twin returning a Handle. save() and request() are the peer-to-peer store. Errors are kungfu.KungFuError and its subclasses, whose
messages name the operation and, for network faults, the peer. `kungfu.python` keeps upstream
KungFu's names; `kungfu.torch` has the optimizers, monitors, policies and the torch.distributed
backend; `kungfu.sim` runs scenarios in the simulator.
"""

from __future__ import annotations

import atexit
from typing import Optional, Tuple

from kungfu import _core
from kungfu._collectives import (Handle, allgather, allgather_async, allreduce, allreduce_async,
                                 barrier, broadcast, broadcast_async, consensus, gather,
                                 gather_async, reduce, reduce_async, request, save)
from kungfu._core import (CancelledError, CollectiveTimeoutError, DeviceError, UnavailableError,
                          InvalidArgumentError, KungFuError, NotFoundError, NotInitializedError,
                          PeerLostError, ProtocolError)

__all__ = [
    "init", "shutdown", "initialized", "rank", "size", "local_rank", "local_size", "strategy",
    "set_strategy", "resize", "propose_new_size", "elastic", "joining",
    "allreduce", "allreduce_async", "broadcast", "broadcast_async", "reduce", "reduce_async",
    "allgather", "allgather_async", "gather", "gather_async", "consensus", "barrier", "Handle",
    "save", "request",
    "KungFuError", "InvalidArgumentError", "CollectiveTimeoutError", "PeerLostError",
    "NotFoundError", "ProtocolError", "CancelledError", "DeviceError", "UnavailableError", "NotInitializedError",
]


def init(timeout: float = 30.0, strategy: Optional[str] = None,
         device_strategy: Optional[str] = None) -> None:
    """Starts this process's runtime and connects to its peers.

    The identity (rank, peers) comes from the launcher: kfrun's KUNGFU_* variables, torchrun's
    RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT, Open MPI's, or Slurm's; with none, a single
    peer. `timeout` is every collective's deadline in seconds; `strategy` overrides the
    launcher's (e.g. "RING_RS_AG"). `device_strategy` is CUDA memory's path for allreduce:
    "NCCL" (the default), "NCCL_HIERARCHICAL", "STAGED" or "STAGED:<strategy>" (docs/gpus.md).
    Calling it again does nothing.
    """
    _core.init(float(timeout), strategy, device_strategy)


def shutdown() -> None:
    """Stops the runtime: pending collectives fail as cancelled. Runs at exit by itself."""
    _core.shutdown()


def initialized() -> bool:
    """Whether init() has run (and shutdown() has not)."""
    return _core.initialized()


def rank() -> int:
    """This peer's rank, 0 <= rank < size()."""
    return _core.rank()


def size() -> int:
    """The number of peers."""
    return _core.size()


def local_rank() -> int:
    """This peer's index among the peers on its host."""
    return _core.local_rank()


def local_size() -> int:
    """The number of peers on this host."""
    return _core.local_size()


def strategy() -> str:
    """The collective strategy in use, e.g. "AUTO" or "RING_RS_AG"."""
    return _core.strategy()


def set_strategy(name: str) -> None:
    """Switches every worker to strategy `name` (STAR, RING_RS_AG, ...) for the collectives they
    start afterwards. A collective: every worker calls it, with the same name, or all of them raise
    InvalidArgumentError and keep the strategy they had."""
    import numpy as np
    agreed = consensus(np.frombuffer(name.encode(), dtype=np.uint8), name="kungfu.set_strategy")
    if not agreed:
        raise InvalidArgumentError(f"kungfu.set_strategy({name!r}): the workers asked for "
                                   "different strategies")
    _core.set_strategy(name)


def resize(n: Optional[int] = None) -> Tuple[bool, bool]:
    """Changes the cluster to `n` workers (upstream KungFu's resize): a collective every worker
    calls at the same point, with no other collective pending. Rank 0 proposes `n` to kfrun's
    config server, kfrun's runners start the workers it adds and stop those it drops, and every
    worker reconnects to the new cluster; with `n` None, the workers adopt what the config
    server holds when it is newer (see propose_new_size). Returns (changed, detached): a detached
    worker is no longer in the cluster and should exit; the others continue with the new rank()
    and size() (new workers start with joining() True; kungfu.torch.elastic syncs them). Only
    under `kfrun -w`; elsewhere InvalidArgumentError."""
    return _core.resize(n)


def propose_new_size(n: int) -> None:
    """Stores a proposal for `n` workers on kfrun's config server, from any one worker (or an
    operator's script), without applying it: the workers adopt it at their next resize()."""
    _core.propose_new_size(n)


def elastic() -> bool:
    """Whether this worker can resize (it runs under `kfrun -w`)."""
    return _core.elastic()


def joining() -> bool:
    """Whether kfrun started this worker into a cluster a resize grew: it must take the state
    of the others (kungfu.torch.elastic.State.sync does) before it trains."""
    return _core.joining()


atexit.register(_core.shutdown)
