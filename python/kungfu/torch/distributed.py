"""The torch.distributed backend "kungfu": torch's collectives on KungFu's runtime.

    import kungfu.torch                      # registers the backend
    torch.distributed.init_process_group("kungfu")
    model = torch.nn.parallel.DistributedDataParallel(model)

It takes the usual env:// rendezvous: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which both
torchrun and kfrun set (kfrun puts torch's store next to rank 0's worker ports). Under mpirun
and srun, which set none of them, importing kungfu.torch fills them in from Open MPI's or Slurm's
variables (export_launcher_identity), so the same script runs unchanged there too. The workers'
identity on the runtime comes from the same launcher; kungfu.init() runs if it has not.
Supported on CPU tensors: allreduce (sum, avg, min, max, product), broadcast, reduce, allgather
(and _allgather_base), gather, barrier, each with a Work whose get_future() DDP uses. Other
calls (send / recv, scatter, reduce_scatter, all_to_all) raise an error naming the call.
"""

from __future__ import annotations

import datetime
import os
from typing import Dict, Mapping, MutableMapping, Optional

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


# (rank, size, local rank, local size) as Open MPI and Slurm name them, in the runtime's order of
# precedence (launch/worker_env.h).
_LAUNCHERS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)
_DEFAULT_PORT_BASE = 10000  # the runtime's KUNGFU_PORT_BASE when unset (launch/worker_env.cc)


def torch_env_for_launcher(env: Mapping[str, str]) -> Dict[str, str]:
    """The torch.distributed env:// variables missing from `env` under mpirun or srun, derived
    from the launcher's variables as the runtime derives its peers; {} when there is nothing to
    add (kfrun or torchrun already set them, no launcher, or a malformed variable, which
    kungfu.init() then reports by name).

    RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE are the launcher's; MASTER_ADDR is node 0
    (the first of KUNGFU_HOSTS, else 127.0.0.1); MASTER_PORT, unless given, is the port after
    node 0's worker ports (KUNGFU_PORT_BASE + local size, as kfrun places torch's store).
    KUNGFU_PORT_BASE is pinned (to 10000 when unset) so that the runtime, which reads torchrun's
    variables before Open MPI's, still derives exactly the peers the launcher's variables give.
    """
    if "KUNGFU_SELF_SPEC" in env or ("RANK" in env and "WORLD_SIZE" in env):
        return {}
    for rank_key, size_key, local_rank_key, local_size_key in _LAUNCHERS:
        if rank_key not in env or size_key not in env:
            continue
        try:
            rank, size = int(env[rank_key]), int(env[size_key])
            local_size = int(env[local_size_key]) if local_size_key in env else size
            local_rank = int(env[local_rank_key]) if local_rank_key in env else rank % local_size
            base = int(env.get("KUNGFU_PORT_BASE", _DEFAULT_PORT_BASE))
        except ValueError:
            return {}
        if not (0 <= rank < size and 0 < local_size and 0 < base <= 65535):
            return {}
        hosts = [h for h in env.get("KUNGFU_HOSTS", "").split(",") if h.strip()]
        store_port = base + local_size if base + local_size <= 65535 else base - 1
        out = {"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(local_rank),
               "LOCAL_WORLD_SIZE": str(local_size), "KUNGFU_PORT_BASE": str(base),
               "MASTER_ADDR": hosts[0].strip() if hosts else "127.0.0.1",
               "MASTER_PORT": str(store_port)}
        return {k: v for k, v in out.items() if k not in env}
    return {}


def export_launcher_identity(environ: Optional[MutableMapping[str, str]] = None) -> Dict[str, str]:
    """Adds torch_env_for_launcher's variables to `environ` (default os.environ, so the runtime
    and torch's env:// rendezvous see them) and returns what it added. Never overwrites a
    variable that is set."""
    target = os.environ if environ is None else environ
    added = torch_env_for_launcher(target)
    target.update(added)
    return added


def register() -> None:
    """Makes "kungfu" a torch.distributed backend (done when kungfu.torch is imported), and under
    mpirun or srun fills in the env:// variables (export_launcher_identity)."""
    export_launcher_identity()
    if BACKEND.upper() not in getattr(dist.Backend, "_plugins", {}):
        dist.Backend.register_backend(BACKEND, _create)
