"""kungfu.torch's optimizers, broadcasts and monitors against serial references."""

import copy
import sys

import numpy as np
import torch

import kungfu
import kungfu.torch as kt

B = 8  # samples per worker per step


def model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))


def data(n: int, steps: int):
    g = torch.Generator().manual_seed(123)
    x = torch.randn(steps, n * B, 6, generator=g)
    y = torch.randint(0, 3, (steps, n * B), generator=g)
    return x, y


def params(m: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()])


def same_everywhere(t: torch.Tensor) -> bool:
    return kungfu.consensus(t.contiguous())


def check(cond: bool, what: str) -> None:
    if not cond:
        print(f"rank {kungfu.rank()}: FAILED {what}", file=sys.stderr)
        sys.exit(1)


def synchronous_sgd_equals_one_big_batch() -> None:
    r, n = kungfu.rank(), kungfu.size()
    steps = 5
    x, y = data(n, steps)
    local = model(7)
    opt = kt.SynchronousSGDOptimizer(torch.optim.SGD(local.parameters(), lr=0.1, momentum=0.9),
                                     named_parameters=local.named_parameters())
    check(isinstance(opt, torch.optim.SGD), "the wrapper is an SGD")
    ref = model(7)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        shard = slice(r * B, (r + 1) * B)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(local(x[s, shard]), y[s, shard]).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(ref(x[s]), y[s]).backward()
        ref_opt.step()
    check(torch.allclose(params(local), params(ref), atol=1e-5),
          f"S-SGD vs one batch: {(params(local) - params(ref)).abs().max()}")
    check(same_everywhere(params(local)), "S-SGD replicas identical")


def sma_follows_its_formula() -> None:
    r, n = kungfu.rank(), kungfu.size()
    m = model(100 + r)  # replicas differ
    alpha, lr = 0.5, 0.05
    opt = kt.SynchronousAveragingOptimizer(torch.optim.SGD(m.parameters(), lr=lr),
                                           named_parameters=m.named_parameters(), alpha=alpha)
    x, y = data(n, 1)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(m(x[0, r * B:(r + 1) * B]), y[0, r * B:(r + 1) * B]).backward()
    before = params(m)
    grad = torch.cat([p.grad.reshape(-1) for p in m.parameters()])
    mean = kungfu.allgather(before).mean(0)
    opt.step()
    want = (1 - alpha) * before + alpha * mean - lr * grad
    check(torch.allclose(params(m), want, atol=1e-6), f"SMA step: {(params(m) - want).abs().max()} {params(m)[:3]} {want[:3]} {before[:3]}")


def adaptive_sgd_switches_to_one_model() -> None:
    r, n = kungfu.rank(), kungfu.size()
    m = model(200 + r)
    opt = kt.AdaptiveSGDOptimizer(torch.optim.SGD(m.parameters(), lr=0.05),
                                  named_parameters=m.named_parameters(), alpha=0.1, change_step=2)
    x, y = data(n, 4)
    for s in range(4):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x[s, r * B:(r + 1) * B]), y[s, r * B:(r + 1) * B]).backward()
        opt.step()
        if s == 1 and n > 1:
            check(not same_everywhere(params(m)), "AdaSGD replicas differ while averaging")
    check(same_everywhere(params(m)), "AdaSGD replicas identical after the switch")


def broadcasts_make_every_worker_rank_zeros() -> None:
    r = kungfu.rank()
    m = model(300 + r)
    opt = torch.optim.Adam(m.parameters(), lr=0.01 * (r + 1))
    if r == 0:  # only rank 0 has stepped: Adam's moments exist there only
        torch.nn.functional.mse_loss(m(torch.ones(2, 6)), torch.zeros(2, 3)).backward()
        opt.step()
    kt.broadcast_parameters(m.state_dict())
    kt.broadcast_optimizer_state(opt)
    check(same_everywhere(params(m)), "parameters after broadcast_parameters")
    check(opt.param_groups[0]["lr"] == 0.01, f"lr after broadcast: {opt.param_groups[0]['lr']}")
    moments = torch.cat([opt.state[p]["exp_avg"].reshape(-1) for p in m.parameters()])
    check(same_everywhere(moments), "Adam's moments after broadcast_optimizer_state")
    obj = kt.broadcast_object({"epoch": 3 + r, "t": torch.arange(3) * r})
    check(obj["epoch"] == 3 and torch.equal(obj["t"], torch.zeros(3, dtype=torch.int64)),
          f"broadcast_object: {obj}")


def noise_scale_matches_the_estimator_on_the_same_gradients() -> None:
    r, n = kungfu.rank(), kungfu.size()
    if n < 2:
        return
    m = model(7)
    gns = kt.GradientNoiseScale(batch_size=B, ema=0.5)
    var = kt.GradientVariance()
    opt = kt.SynchronousSGDOptimizer(torch.optim.SGD(m.parameters(), lr=0.01),
                                     named_parameters=m.named_parameters(), monitors=[gns, var])
    x, y = data(n, 3)
    g2_ema = s_ema = None
    for s in range(3):
        # This worker's gradient, from a copy without the optimizer's hooks (the optimizer
        # averages its model's gradients in place while backward() runs).
        twin = copy.deepcopy(m)
        torch.nn.functional.cross_entropy(twin(x[s, r * B:(r + 1) * B]),
                                          y[s, r * B:(r + 1) * B]).backward()
        local = torch.cat([p.grad.reshape(-1) for p in twin.parameters()])
        opt.zero_grad()
        torch.nn.functional.cross_entropy(m(x[s, r * B:(r + 1) * B]), y[s, r * B:(r + 1) * B]).backward()
        opt.step()
        every = kungfu.allgather(local)
        avg = every.mean(0)
        small, big = float(local.square().sum()), float(avg.square().sum())
        bs, bb = B, B * n
        g2 = (bb * big - bs * small) / (bb - bs)
        tr = (small - big) / (1 / bs - 1 / bb)
        g2_ema = g2 if g2_ema is None else 0.5 * g2_ema + 0.5 * g2
        s_ema = tr if s_ema is None else 0.5 * s_ema + 0.5 * tr
        variance = float((every.square().mean(0) - every.mean(0).square()).sum())
        check(abs(var.variance - variance) <= 1e-4 * max(1.0, abs(variance)),
              f"variance {var.variance} vs {variance}")
    want = s_ema / g2_ema if g2_ema > 0 and s_ema > 0 else None
    got = gns.noise_scale
    check((want is None and got is None) or abs(got - want) <= 1e-3 * abs(want),
          f"noise scale {got} vs {want}")


def pair_averaging_keeps_replicas_close() -> None:
    """Replicas that start apart: with pair averaging their spread shrinks; alone it does not."""
    r, n = kungfu.rank(), kungfu.size()
    if n < 2:
        return

    def spread(m) -> float:
        every = kungfu.allgather(params(m))
        return float((every - every.mean(0)).norm(dim=1).max())

    x, y = data(n, 30)
    runs = {}
    for averaged in (False, True):
        m = model(400 + r)
        base = torch.optim.SGD(m.parameters(), lr=0.02)
        opt = kt.PairAveragingOptimizer(base, m.named_parameters(), seed=1) if averaged else base
        start = spread(m)
        for s in range(30):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x[s, r * B:(r + 1) * B]),
                                              y[s, r * B:(r + 1) * B]).backward()
            opt.step()
            kungfu.barrier(name=f"pair-{averaged}-{s}")  # every save lands before the next step
        runs[averaged] = (start, spread(m))
    check(runs[True][1] < 0.2 * runs[True][0], f"pair averaging spread {runs[True]}")
    check(runs[False][1] > 0.5 * runs[False][0], f"alone spread {runs[False]}")


if __name__ == "__main__":
    kungfu.init(timeout=60)
    for test in (synchronous_sgd_equals_one_big_batch, sma_follows_its_formula,
                 adaptive_sgd_switches_to_one_model, broadcasts_make_every_worker_rank_zeros,
                 noise_scale_matches_the_estimator_on_the_same_gradients,
                 pair_averaging_keeps_replicas_close):
        test()
        print(f"rank {kungfu.rank()}: {test.__name__} ok", flush=True)
