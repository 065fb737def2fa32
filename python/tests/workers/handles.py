"""Async handles: many collectives in flight, waited for out of order; wait_for and ready;
callbacks on kungfu's completion thread, never the caller's; memory kept alive without the
handle; strategies switched at run time by every worker together."""

import gc
import sys
import threading

import numpy as np
import torch

import kungfu


def main() -> None:
    kungfu.init(timeout=30)
    r, n = kungfu.rank(), kungfu.size()
    handles = [kungfu.allreduce_async(torch.full((1000,), float(r + i)), name=f"h{i}")
               for i in range(20)]
    for i, h in reversed(list(enumerate(handles))):
        got = h.wait()
        want = sum(q + i for q in range(n))
        assert torch.all(got == want), (i, got[:3], want)
        assert h.ready() and h.wait_for(0)
        assert h.what == f"allreduce 'h{i}'", h.what

    # A callback runs on the completion thread with the error (None here).
    seen = []
    done = threading.Event()
    caller = threading.get_ident()

    def callback(error):
        seen.append((threading.get_ident(), error))
        done.set()

    h = kungfu.allreduce_async(np.ones(10), name="cb")
    h.add_done_callback(callback)
    h.wait()
    assert done.wait(10), "callback never ran"
    assert seen[0][1] is None and seen[0][0] != caller, seen

    # Dropped handle and array: the runtime keeps the memory until the collective completes.
    for i in range(10):
        kungfu.allreduce_async(np.full(1 << 18, float(r), dtype=np.float32), name=f"drop{i}")
    gc.collect()
    kungfu.barrier(name="after-drops")

    # wait_for before the peers have joined: False; after: True. The others join only once
    # rank 0 has let them through a barrier of another name.
    if n > 1:
        if r == 0:
            h = kungfu.allreduce_async(np.ones(4), name="late")
            assert h.wait_for(0.2) is False, "completed without its peers"
            assert not h.ready()
            kungfu.barrier(name="gate")
            assert h.wait_for(30)
        else:
            kungfu.barrier(name="gate")
            kungfu.allreduce(np.ones(4), name="late")
    # Strategies switch at run time, all workers together; a disagreement changes nothing.
    for name in ("STAR", "RING_RS_AG", "BINARY_TREE_STAR"):
        kungfu.set_strategy(name)
        assert kungfu.strategy() == name, kungfu.strategy()
        got = kungfu.allreduce(np.full(1000, float(r)))
        assert (got == sum(range(n))).all(), (name, got[:3])
    if n > 1:
        try:
            kungfu.set_strategy("STAR" if r == 0 else "RING")
            raise AssertionError("a disagreement went through")
        except kungfu.InvalidArgumentError as e:
            assert "different strategies" in str(e), e
        assert kungfu.strategy() == "BINARY_TREE_STAR"
    print(f"rank {r}: handles ok", flush=True)


if __name__ == "__main__":
    sys.exit(main())
