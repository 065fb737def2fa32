"""Prints, as one JSON line, the identity this worker got from its launcher: kungfu's rank, size,
local rank and local size after init(), the launcher's own variables, and torch's env://
variables. MODE is "plain" (kungfu alone), "torch" (import kungfu.torch first, which fills in
torch's variables under mpirun and srun) or "hang" (sleeps, for the launcher's timeout)."""

import json
import os
import sys
import time

import numpy as np

MODE = sys.argv[1] if len(sys.argv) > 1 else "plain"
if MODE == "hang":
    time.sleep(600)
if MODE == "torch":
    import kungfu.torch  # noqa: F401

import kungfu

kungfu.init(timeout=60)
ranks = kungfu.allgather(np.array([kungfu.rank()], dtype=np.int32)).reshape(-1).tolist()
keys = ["OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE", "KUNGFU_PORT_BASE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
        "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]
print("IDENTITY " + json.dumps({
    "rank": kungfu.rank(), "size": kungfu.size(), "local_rank": kungfu.local_rank(),
    "local_size": kungfu.local_size(), "allgathered_ranks": ranks,
    "env": {k: os.environ.get(k) for k in keys}}), flush=True)
kungfu.barrier()
