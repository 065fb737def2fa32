"""Upstream KungFu's names: importing kungfu.python initialises the runtime."""

import kungfu
from kungfu.python import (all_reduce_int_max, current_cluster_size, current_local_rank,
                           current_local_size, current_rank, run_barrier)

assert kungfu.initialized()
r, n = current_rank(), current_cluster_size()
assert (current_local_rank(), current_local_size()) == (r, n)  # one host
assert all_reduce_int_max(10 * r) == 10 * (n - 1)
run_barrier()
print(f"rank {r} of {n}: upstream names ok", flush=True)
