"""An elastic S-SGD job under kfrun -w that resizes itself: `--sizes 4,1,3` resizes to each size
in turn, `--every` steps apart. After every sync rank 0 prints one line
    resized <i>: size <n> step <s> agreed <bool>
where `agreed` says every worker holds the same step counter and parameters (by consensus), and
every worker checks that it sees the size asked for and the strategy set before the first resize. Workers dropped by a resize exit 0.

    kfrun -w -np 2 -H 127.0.0.1:4 -builtin-config-port P python3 elastic.py --sizes 4,1,3
"""

import argparse
import sys

import numpy as np
import torch

import kungfu
import kungfu.torch as kt
from kungfu.torch.elastic import ElasticSampler, State, run

B = 4  # samples per worker per step
N = 4096  # data set size


def fail(what: str) -> None:
    print(f"rank {kungfu.rank()}: FAILED {what}", file=sys.stderr, flush=True)
    sys.exit(1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", required=True, help="sizes to resize to, in order")
    ap.add_argument("--every", type=int, default=2, help="steps between resizes")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    torch.set_num_threads(1)
    kungfu.init(timeout=60)
    g = torch.Generator().manual_seed(5)
    xs, ys = torch.randn(N, 6, generator=g), torch.randint(0, 3, (N,), generator=g)
    torch.manual_seed(kungfu.rank() + 100)  # different on purpose: the sync must fix it
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    opt = kt.SynchronousSGDOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                     named_parameters=model.named_parameters())
    state = State(model, opt, step=0, resizes=0, samples=0, epoch=0)
    total = a.every * (len(sizes) + 1)

    @run
    def train(state: State) -> int:
        want = sizes[state.resizes - 1] if state.resizes else None
        if want is not None and kungfu.size() != want:
            fail(f"size {kungfu.size()} after resize {state.resizes}, want {want}")
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        agreed = kungfu.consensus(np.frombuffer(flat.numpy().tobytes() + np.int64(
            state.step).tobytes(), dtype=np.uint8), name="test.agreed")
        if kungfu.rank() == 0:
            print(f"resized {state.resizes}: size {kungfu.size()} step {state.step} agreed "
                  f"{agreed}", flush=True)
        if not agreed:
            fail("workers differ after a sync")
        if state.resizes == 0:
            kungfu.set_strategy("RING")  # joiners start on the launcher's: the sync fixes theirs
        elif kungfu.strategy() != "RING":
            fail(f"strategy {kungfu.strategy()} after resize {state.resizes}, want RING")
        while state.step < total:
            sampler = ElasticSampler(N, B, seed=3, epoch=state.epoch, start=state.samples)
            for idx in sampler:
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(xs[idx]), ys[idx]).backward()
                opt.step()
                state.step += 1
                state.samples += sampler.step_samples
                if state.step % a.every == 0 and state.resizes < len(sizes):
                    state.resizes += 1
                    state.resize(sizes[state.resizes - 1])
                if state.step >= total:
                    break
            else:
                state.epoch, state.samples = state.epoch + 1, 0
        return state.step

    steps = train(state)
    if steps is None:
        print(f"detached at a resize", flush=True)
        return
    if kungfu.rank() == 0:
        print(f"done: {steps} steps on {kungfu.size()} workers", flush=True)


if __name__ == "__main__":
    main()
