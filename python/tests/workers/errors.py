"""Failure modes, one per MODE argument; each prints "OK <what>" when the error is as it must be.

  kill-peer        rank 1 dies mid-allreduce: every survivor raises PeerLostError naming it
  names-differ     rank 0 and rank 1 name one allreduce differently: both raise within the timeout
  size-mismatch    rank 0 allreduces 10 elements, the others 12: every rank raises, no hang
  bad-input        wrong dtype, wrong type, read-only in place, unknown op: errors naming the call
  interrupted      Ctrl-C in blocking calls whose peer has not joined (2 ranks): each raises
                   KeyboardInterrupt at once, the runtime keeps the array until the call completes
"""

import gc
import os
import signal
import sys
import threading
import time
import weakref

import numpy as np
import torch

import kungfu


def ok(what: str) -> None:
    print(f"OK rank {kungfu.rank() if kungfu.initialized() else '-'}: {what}", flush=True)


def kill_peer() -> None:
    kungfu.init(timeout=20)
    kungfu.barrier()
    x = np.ones(1 << 20, dtype=np.float32)
    if kungfu.rank() == 1:
        h = kungfu.allreduce_async(x)  # in flight when the process dies
        time.sleep(0.05)
        os._exit(3)
    start = time.monotonic()
    try:
        for _ in range(50):
            kungfu.allreduce(x)
    except kungfu.PeerLostError as e:
        took = time.monotonic() - start
        assert "rank 1" in str(e), str(e)
        assert "allreduce" in str(e), str(e)
        ok(f"PeerLostError after {took:.2f}s: {e}")
        # A survivor that left at once would be lost by the other survivor too, which may see
        # its end before the killed peer's (their closes can come in one batch) and name it:
        # stay a moment, so that every survivor's error is the killed peer's.
        time.sleep(1.0)
        os._exit(0)  # the runtime's peers are gone: skip the orderly goodbye
    sys.exit("no error raised")


def names_differ() -> None:
    kungfu.init(timeout=3)
    start = time.monotonic()
    try:
        kungfu.allreduce(np.ones(4, dtype=np.float32), name=f"grad-{kungfu.rank()}")
    except kungfu.CollectiveTimeoutError as e:
        took = time.monotonic() - start
        assert took < 10, took
        assert f"grad-{kungfu.rank()}" in str(e), str(e)
        ok(f"CollectiveTimeoutError after {took:.1f}s: {e}")
        return
    sys.exit("no error raised")


def size_mismatch() -> None:
    kungfu.init(timeout=5)
    n = 10 if kungfu.rank() == 0 else 12
    start = time.monotonic()
    try:
        kungfu.allreduce(np.ones(n, dtype=np.float32), name="mismatched")
    except kungfu.KungFuError as e:
        ok(f"{type(e).__name__} after {time.monotonic() - start:.1f}s: {e}")
        os._exit(0)  # peers may still be failing theirs
    sys.exit("no error raised")


def expect(exc_type, fragment: str, fn) -> None:
    try:
        fn()
    except exc_type as e:
        assert fragment in str(e), f"{fragment!r} not in {e!r}"
        ok(f"{exc_type.__name__}: {e}")
        return
    sys.exit(f"no {exc_type.__name__} for {fragment}")


def bad_input() -> None:
    expect(kungfu.NotInitializedError, "call kungfu.init() first",
           lambda: kungfu.allreduce(np.ones(3)))
    kungfu.init(timeout=10)
    expect(TypeError, "kungfu.allreduce: dtype torch.bool",
           lambda: kungfu.allreduce(torch.ones(3, dtype=torch.bool)))
    expect(TypeError, "kungfu.broadcast: expected a numpy array or a torch tensor, got list",
           lambda: kungfu.broadcast([1, 2, 3]))
    expect(TypeError, "kungfu.allreduce: dtype complex128",
           lambda: kungfu.allreduce(np.ones(3, dtype=np.complex128)))
    ro = np.ones(3, dtype=np.float32)
    ro.setflags(write=False)
    expect(ValueError, "read-only", lambda: kungfu.allreduce(ro, inplace=True))
    expect(ValueError, "unknown op 'mean'", lambda: kungfu.allreduce(np.ones(3), op="mean"))
    expect(kungfu.InvalidArgumentError, "avg",
           lambda: kungfu.allreduce(np.ones(3, dtype=np.int32), op="avg"))
    expect(kungfu.InvalidArgumentError, "root",
           lambda: kungfu.broadcast(np.ones(3), root=kungfu.size() + 5))
    kungfu.barrier()


def interrupted() -> None:
    """Rank 0 starts each blocking call alone and is interrupted; rank 1 joins it afterwards."""
    kungfu.init(timeout=30)
    r = kungfu.rank()
    calls = {
        "allreduce of a numpy array": lambda x, name: kungfu.allreduce(x, inplace=True, name=name),
        "allreduce of a tensor": lambda x, name: kungfu.allreduce(torch.from_numpy(x), name=name),
        "broadcast": lambda x, name: kungfu.broadcast(x, root=1, name=name),
    }
    for i, (what, call) in enumerate(calls.items()):
        x = np.full(1 << 16, float(r + 1), dtype=np.float32)
        name = f"interrupted-{i}"
        if r == 0:
            kept = weakref.ref(x)
            threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
            start = time.monotonic()
            try:
                call(x, name)
                raise AssertionError(f"{what} completed without its peer")
            except KeyboardInterrupt:
                took = time.monotonic() - start
            assert took < 2, f"{what}: KeyboardInterrupt after {took:.2f}s"
            del x
            gc.collect()
            assert kept() is not None, f"{what}: the array went while the call was pending"
            kungfu.barrier(name=f"join-{i}")  # rank 1 now makes its call: rank 0's completes
            kungfu.barrier(name=f"joined-{i}")
            deadline = time.monotonic() + 10
            while kept() is not None and time.monotonic() < deadline:
                kungfu.rank()  # each call into the runtime lets go of what completed
                time.sleep(0.01)
            assert kept() is None, f"{what}: the array was kept after the call completed"
            ok(f"{what} interrupted after {took:.2f}s, its array kept until it completed")
        else:
            kungfu.barrier(name=f"join-{i}")
            got = call(x, name)
            want = 3.0 if what.startswith("allreduce") else 2.0  # broadcast: its own
            assert np.all(np.asarray(got) == want), (what, np.asarray(got)[:3])
            kungfu.barrier(name=f"joined-{i}")
            ok(f"{what} completed with the interrupted peer's data")
    kungfu.barrier()


if __name__ == "__main__":
    {"kill-peer": kill_peer, "names-differ": names_differ, "size-mismatch": size_mismatch,
     "bad-input": bad_input, "interrupted": interrupted}[sys.argv[1]]()
