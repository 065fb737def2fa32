"""torch.distributed's Work objects on backend "kungfu", 2 ranks: waited for at once (the waiting
thread marks the future), waited for with a limit that passes first and then again, and dropped
before their collective completes, whose tensor the runtime then keeps until it does (the peer
still gets its values). Each rank prints OK."""

import datetime
import gc
import time

import torch
import torch.distributed as dist

import kungfu.torch  # noqa: F401  (registers "kungfu")

dist.init_process_group("kungfu")
rank, size = dist.get_rank(), dist.get_world_size()
assert size == 2, size

# Waited for at once: complete, successful, the result in place; its future, asked for after the
# wait, is done with the same tensor.
t = torch.full((4,), float(rank + 1))
work = dist.all_reduce(t, async_op=True)
assert work.wait() is True
assert work.is_completed()
assert torch.equal(t, torch.full((4,), 3.0)), t
future = work.get_future()
assert future.done() and torch.equal(future.value()[0], t), future.value()

# A wait whose limit passes first (rank 1 comes 0.5 s late): an error naming the collective and
# the limit; the Work is still pending, and a later wait completes it.
t = torch.ones(2)
if rank == 1:
    time.sleep(0.5)
work = dist.all_reduce(t, async_op=True)
if rank == 0:
    try:
        work.wait(datetime.timedelta(milliseconds=50))
        raise AssertionError("a 50 ms wait for a peer 0.5 s late returned")
    except RuntimeError as e:
        assert "timed out after 50 ms" in str(e) and "allreduce" in str(e), e
    assert not work.is_completed()
work.wait()
assert torch.equal(t, torch.full((2,), 2.0)), t

# Dropped at once, with the only reference to its tensor, while the peer comes 0.3 s later: the
# memory stays the tensor's (new tensors of the same size do not take it), and the peer receives
# the dropped tensor's 2s.
if rank == 0:
    dist.all_reduce(torch.full((1024,), 2.0), async_op=True)
    gc.collect()
    junk = [torch.full((1024,), 9.0) for _ in range(64)]
else:
    time.sleep(0.3)
    y = torch.full((1024,), 3.0)
    dist.all_reduce(y)
    assert torch.equal(y, torch.full((1024,), 5.0)), y[:4]
dist.barrier()
print(f"rank {rank} OK", flush=True)
dist.destroy_process_group()
