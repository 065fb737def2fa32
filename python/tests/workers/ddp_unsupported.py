"""What the kungfu backend does not do raises an error that says so."""

import sys

import torch
import torch.distributed as dist

import kungfu.torch  # noqa: F401


def expect_error(fragment: str, fn) -> None:
    try:
        fn()
    except RuntimeError as e:
        if fragment not in str(e):
            sys.exit(f"{fragment!r} not in {e}")
        print(f"OK rank {dist.get_rank()}: {str(e).splitlines()[0]}", flush=True)
        return
    sys.exit(f"no error for {fragment!r}")


dist.init_process_group("kungfu")
expect_error("kungfu backend: allreduce: dtype Bool",
             lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool)))
expect_error("reduce op not supported", lambda: dist.all_reduce(torch.ones(2), op=dist.ReduceOp.BAND))
if dist.get_rank() == 0:
    expect_error("send", lambda: dist.send(torch.ones(1), dst=1))
else:
    expect_error("recv", lambda: dist.recv(torch.ones(1), src=0))
dist.barrier()
