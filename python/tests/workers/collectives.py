"""Every collective x dtype x in-place / out-of-place, numpy and torch, against a serial reference.

Run under kfrun with any number of workers; exits non-zero naming the first mismatch.
"""

import sys

import numpy as np
import torch

import kungfu

NUMPY_DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64,
                np.float16, np.float32, np.float64]
TORCH_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
                torch.bfloat16, torch.float32, torch.float64]
OPS = ["sum", "min", "max", "prod", "avg"]


def values(rank: int, count: int, op: str) -> np.ndarray:
    """Rank `rank`'s input as float64: small, so no dtype overflows when n <= 4."""
    i = np.arange(count)
    if op == "prod":
        return 1.0 + ((rank + i) % 2)
    return 1.0 + (rank * 3 + i) % 7


def expected(n: int, count: int, op: str) -> np.ndarray:
    stack = np.stack([values(r, count, op) for r in range(n)])
    return {"sum": stack.sum(0), "min": stack.min(0), "max": stack.max(0),
            "prod": stack.prod(0), "avg": stack.mean(0)}[op]


def as_numpy(x) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.to(torch.float64).numpy()
    return x.astype(np.float64)


def is_float(dtype) -> bool:
    return dtype in (np.float16, np.float32, np.float64, torch.float16, torch.bfloat16,
                     torch.float32, torch.float64)


def make(kind: str, dtype, data: np.ndarray, contiguous: bool):
    if kind == "numpy":
        x = data.astype(dtype)
        if not contiguous:  # every other element of a twice-as-long array
            wide = np.zeros(2 * len(x), dtype=dtype)
            wide[::2] = x
            x = wide[::2]
        return x
    x = torch.from_numpy(data).to(dtype)
    if not contiguous:
        wide = torch.zeros(2 * len(x), dtype=dtype)
        wide[::2] = x
        x = wide[::2]
    return x


def close(got, want: np.ndarray, dtype) -> bool:
    tol = 2e-2 if dtype in (np.float16, torch.float16, torch.bfloat16) else 1e-6
    return np.allclose(as_numpy(got), want, rtol=tol, atol=tol)


def fail(what: str, got, want) -> None:
    print(f"rank {kungfu.rank()}: {what}: got {as_numpy(got)[:8]}, want {np.asarray(want)[:8]}",
          file=sys.stderr)
    sys.exit(1)


def check_all() -> int:
    r, n = kungfu.rank(), kungfu.size()
    checks = 0
    cases = [("numpy", d) for d in NUMPY_DTYPES] + [("torch", d) for d in TORCH_DTYPES]
    for kind, dtype in cases:
        sizes = [13, 300_000] if dtype in (np.float32, torch.float32, np.int64) else [13]
        for count in sizes:
            for contiguous in (True, False) if count == 13 else (True,):
                for op in OPS:
                    if op == "avg" and not is_float(dtype):
                        continue
                    for inplace in (False, True):
                        x = make(kind, dtype, values(r, count, op), contiguous)
                        got = kungfu.allreduce(x, op, inplace=inplace)
                        want = expected(n, count, op)
                        what = f"allreduce {kind} {dtype} n={count} {op} inplace={inplace}"
                        if not close(got, want, dtype):
                            fail(what, got, want)
                        if inplace and got is not x:
                            fail(what + ": not the input returned", got, want)
                        checks += 1
                # broadcast from the last rank, in place and not
                for inplace in (False, True):
                    x = make(kind, dtype, values(r, count, "sum"), contiguous)
                    got = kungfu.broadcast(x, root=n - 1, inplace=inplace)
                    if not close(got, values(n - 1, count, "sum"), dtype):
                        fail(f"broadcast {kind} {dtype} inplace={inplace}", got,
                             values(n - 1, count, "sum"))
                    checks += 1
                # reduce to rank 0
                x = make(kind, dtype, values(r, count, "sum"), contiguous)
                got = kungfu.reduce(x, "max", root=0)
                if r == 0 and not close(got, expected(n, count, "max"), dtype):
                    fail(f"reduce {kind} {dtype}", got, expected(n, count, "max"))
                # allgather and gather: (n, count) in rank order
                want = np.stack([values(q, count, "sum") for q in range(n)])
                got = kungfu.allgather(x)
                if tuple(got.shape) != (n, count) or not close(got, want, dtype):
                    fail(f"allgather {kind} {dtype}", got.reshape(-1), want.reshape(-1))
                got = kungfu.gather(x, root=n - 1)
                if r == n - 1 and not close(got, want, dtype):
                    fail(f"gather {kind} {dtype}", got.reshape(-1), want.reshape(-1))
                checks += 3
    same = np.arange(10, dtype=np.int32)
    if not kungfu.consensus(same):
        fail("consensus of equal arrays", [False], [True])
    differ = np.full(10, r, dtype=np.int32)
    if kungfu.consensus(differ) != (n == 1):
        fail("consensus of different arrays", [True], [n == 1])
    kungfu.barrier()
    return checks + 2


if __name__ == "__main__":
    kungfu.init(timeout=60)
    checks = check_all()
    print(f"rank {kungfu.rank()} of {kungfu.size()}: {checks} checks passed")
