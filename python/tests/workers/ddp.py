"""DistributedDataParallel on backend BACKEND (kungfu or gloo): N steps of SGD on a small MLP from
one seed; prints every parameter's sum of values and a checksum of the whole model so that the
test can compare backends. Also exercises the backend's other collectives."""

import sys

import torch
import torch.distributed as dist

import kungfu.torch  # noqa: F401  (registers "kungfu")

backend, steps = sys.argv[1], int(sys.argv[2])
dist.init_process_group(backend)
rank, size = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)  # several buckets
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
g = torch.Generator().manual_seed(1 + rank)
for _ in range(steps):
    x, y = torch.randn(16, 20, generator=g), torch.randint(0, 4, (16,), generator=g)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(ddp(x), y).backward()
    opt.step()

t = torch.tensor([float(rank + 1)])
dist.all_reduce(t, op=dist.ReduceOp.MAX)
assert t.item() == size, t
gathered = [torch.zeros(2, dtype=torch.int64) for _ in range(size)]
dist.all_gather(gathered, torch.tensor([rank, 7 * rank]))
assert [x.tolist() for x in gathered] == [[r, 7 * r] for r in range(size)], gathered
b = torch.tensor([rank * 1.5])
dist.broadcast(b, src=size - 1)
assert b.item() == (size - 1) * 1.5, b
red = torch.tensor([rank + 1.0])
dist.reduce(red, dst=0)
assert rank != 0 or red.item() == size * (size + 1) / 2, red
work = dist.all_reduce(torch.ones(3), async_op=True)
fut = work.get_future()
assert torch.equal(fut.wait()[0], torch.full((3,), float(size))), fut.value()
dist.barrier()
flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
print(f"rank {rank} params " + " ".join(f"{v:.9e}" for v in flat[:: max(1, len(flat) // 16)]),
      flush=True)
dist.destroy_process_group()
