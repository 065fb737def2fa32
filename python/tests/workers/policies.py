"""kungfu.torch.PolicyRunner on real processes: `policies.py CHECK...` runs each check and prints
"<check> ok" per worker. Checks: agree (a Python policy and a C++ one decide from the summed
contributions, identically on every rank, though every rank's metrics differ), switch (strategy
switches on every worker at the same step, to a named strategy and to a forest), settings (batch size, learning
rate, stop; state_dict and sync), disagree (a policy deciding from local metrics is a
ProtocolError on every rank), not-elastic (a resize outside kfrun -w is a clear error), bad-input
(names, parameters, non-actions, non-numbers), elastic (scheduled_resize under kfrun -w through
kungfu.torch.elastic; prints "synced: size N step S" on rank 0 after each sync).
"""

import sys
import time

import numpy as np
import torch

import kungfu
import kungfu.torch as kt
from kungfu.torch import (BasePolicy, PolicyRunner, Resize, SetBatchSize, SetLearningRate,
                          StopTraining, SwitchStrategy)


def fail(what: str) -> None:
    print(f"rank {kungfu.rank()}: FAILED {what}", file=sys.stderr, flush=True)
    sys.exit(1)


def check(cond: bool, what: str) -> None:
    if not cond:
        fail(what)


def same_everywhere(text: str, name: str) -> bool:
    return kungfu.consensus(np.frombuffer(text.encode() or b"-", dtype=np.uint8).copy(),
                            name=name)


def expect_error(kind: type, words: list, fn, what: str) -> None:
    try:
        fn()
    except kind as e:
        for w in words:
            check(w in str(e), f"{what}: {w!r} not in {e!r}")
        return
    except Exception as e:  # noqa: BLE001 - anything else is the failure reported
        fail(f"{what}: raised {type(e).__name__}: {e}, want {kind.__name__}")
    fail(f"{what}: no {kind.__name__}")


class SumPolicy(BasePolicy):
    """Contributes a local number; every third step sets the batch to the cluster's sum."""

    name = "sum_policy"

    def __init__(self) -> None:
        self.sums = []

    def contribute(self, metrics, state):
        return [metrics.values["x"]]

    def after_step(self, metrics, sums, state):
        self.sums.append(list(sums))
        if state.step % 3 == 2:
            return [SetBatchSize(int(sums[0]))]
        return []


def agree() -> None:
    r, n = kungfu.rank(), kungfu.size()
    seen = []

    class Watch(BasePolicy):
        def contribute(self, metrics, state):
            seen.append((metrics.rank, metrics.samples, metrics.batch_per_worker,
                         metrics.step_seconds, metrics.period_seconds, metrics.step))
            return []

    policy = SumPolicy()
    runner = PolicyRunner([policy, "adaptive_batch_size:interval=2,min_batch=1,max_batch=4096,"
                           "lr_rule=none", Watch()], batch_size=10)
    check(runner.names == ["sum_policy", "adaptive_batch_size", "Watch"], f"{runner.names}")
    runner.before_train()
    for step in range(6):
        check(runner.step == step, f"runner.step {runner.step} at step {step}")
        runner.before_step()
        time.sleep(0.005)
        # Every rank its own metrics: only the sums may decide.
        runner.after_step({"x": r + 1 + step, "gns": 100.0 * (r + 1), "loss": None})
    # The reference: the sums, then the decisions in stack order from the state before them.
    batch, history = 10, []
    gns = 100.0 * (n + 1) / 2  # the mean of the ranks' estimates
    for step in range(6):
        asked = []
        if step % 3 == 2:
            asked.append(("sum_policy", n * (n + 1) // 2 + n * step))
        if (step + 1) % 2 == 0:
            target = min(max(int(np.floor(gns / n + 0.5)), 1), 4096)
            if abs(target - batch) > 0.2 * batch:
                asked.append(("adaptive_batch_size", target))
        for who, b in asked:
            history.append((step + 1, who, f"batch {b}"))
        if asked:
            batch = asked[-1][1]
    got = [(s, who, a.describe()) for s, who, a in runner.history]
    check(got == history, f"history {got}, want {history}")
    check(runner.batch_size == batch, f"batch {runner.batch_size}, want {batch}")
    check(policy.sums == [[n * (n + 1) / 2 + n * s] for s in range(6)], f"sums {policy.sums}")
    check(same_everywhere(repr(got), "test.agree"), "histories differ across ranks")
    # What the Python policies saw: this worker's identity and timing, the batch of the step.
    check([s[0] for s in seen] == [r] * 6, f"metrics ranks {seen}")
    check(all(s[1] == s[2] for s in seen), f"samples default to the batch: {seen}")
    check(all(s[3] >= 0.005 and s[4] > 0 for s in seen), f"step times {seen}")
    check([s[5] for s in seen] == list(range(6)), f"metrics steps {seen}")
    runner.after_train()


def switch() -> None:
    first = kungfu.strategy()

    class SwitchAt(BasePolicy):
        def after_step(self, metrics, sums, state):
            if state.step == 1:
                return [SwitchStrategy("RING")]
            if state.step == 3:
                return [SwitchStrategy(state.configured_strategy, label="back")]
            return []

    runner = PolicyRunner([SwitchAt()])
    strategies = []
    x = torch.ones(1000)
    for step in range(5):
        strategies.append((kungfu.strategy(), runner.state.strategy))
        runner.before_step()
        y = kungfu.allreduce(x, name=f"test.switch/{step}")
        check(float(y[0]) == kungfu.size(), f"allreduce on {kungfu.strategy()}")
        runner.after_step()
    want = [(first, first)] * 2 + [("RING", "RING")] * 2 + [(first, "back")]
    check(strategies == want, f"strategies {strategies}, want {want}")
    check(same_everywhere(repr(strategies), "test.switch"), "switches differ across ranks")

    # A forest (what adaptive_strategy's STAR@r and MST are): a star rooted at the last rank.
    class Forest(BasePolicy):
        def after_step(self, metrics, sums, state):
            root = state.cluster_size - 1
            return [SwitchStrategy(forest=[root] * state.cluster_size, label=f"STAR@{root}")]

    runner = PolicyRunner([Forest()])
    runner.before_step()
    runner.after_step()
    star = f"STAR@{kungfu.size() - 1}"
    check(kungfu.strategy() == star and runner.state.strategy == star,
          f"after a forest switch: {kungfu.strategy()}, {runner.state.strategy}")
    y = kungfu.allreduce(torch.arange(10.0), name="test.forest")
    check(torch.equal(y, torch.arange(10.0) * kungfu.size()), f"allreduce over {star}: {y}")
    check(runner.state.host_of == [0] * kungfu.size(), f"host_of {runner.state.host_of}")
    n = kungfu.size()
    expect_error(kungfu.InvalidArgumentError, [f"forest of {n + 1} ranks"],
                 lambda: kungfu._core.set_strategy_forest([0] * (n + 1), "bad"),
                 "a forest of the wrong size")


def settings() -> None:
    class Plan(BasePolicy):
        def __init__(self) -> None:
            self.applied_at = []
            self.loaded = None

        def after_step(self, metrics, sums, state):
            if state.step == 1:
                return [SetBatchSize(48), SetLearningRate(0.05)]
            if state.step == 3:
                return [StopTraining("plan done")]
            return []

        def applied(self, action, state):
            self.applied_at.append((state.step, action.describe()))

        def save_state(self):
            return [float(len(self.applied_at))]

        def load_state(self, values):
            self.loaded = list(values)

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD([{"params": [model.weight]}, {"params": [model.bias], "lr": 0.2}],
                          lr=0.1)
    gns = kt.GradientNoiseScale(batch_size=16)
    plan = Plan()
    runner = PolicyRunner([plan], batch_size=16, optimizer=opt, monitors=[gns])
    check(runner.learning_rate == 0.1, "the learning rate from the optimizer")
    runner.before_train()
    steps = 0
    while not runner.stopped:
        runner.before_step()
        runner.after_step()
        steps += 1
    check(steps == 4, f"stopped after {steps} steps")
    check(runner.stop_reason == "plan done", runner.stop_reason)
    check(runner.batch_size == 48 and gns.batch_size == 48, "the batch size")
    check([g["lr"] for g in opt.param_groups] == [0.05, 0.05], f"{opt.param_groups}")
    check(plan.applied_at == [(2, "batch 48"), (2, "lr 0.05"), (4, "stop (plan done)")],
          f"{plan.applied_at}")
    saved = runner.state_dict()
    check(saved["step"] == 4 and saved["batch_size"] == 48 and saved["stopped"], f"{saved}")
    # Another worker's state, taken as a joining worker takes rank 0's.
    other = Plan()
    again = PolicyRunner([other], batch_size=kungfu.rank() + 1)
    again.load_state_dict(saved)
    check(other.loaded == [3.0] and again.step == 4 and again.batch_size == 48, "load_state_dict")
    fresh = PolicyRunner([Plan()], batch_size=kungfu.rank() + 1)
    fresh.sync()
    check(fresh.batch_size == 1, f"sync: batch {fresh.batch_size}, want rank 0's")
    expect_error(ValueError, ["different stack", "adaptive_batch_size, scheduled_resize"],
                 lambda: PolicyRunner(["adaptive_batch_size", "scheduled_resize:schedule=9:1"]
                                      ).load_state_dict(saved), "a state from another stack")
    expect_error(ValueError, ["load_state_dict", "adaptive_batch_size: bad saved state"],
                 lambda: PolicyRunner(["adaptive_batch_size"]).load_state_dict(saved),
                 "a state another policy saved")


def disagree() -> None:
    class Local(BasePolicy):
        def after_step(self, metrics, sums, state):
            return [SetBatchSize(int(metrics.values["x"]))]  # local: breaks the contract

    runner = PolicyRunner([Local(), "adaptive_batch_size"], batch_size=8)
    runner.before_step()
    expect_error(kungfu.ProtocolError,
                 ["step 0", "policies decided differently",
                  f"rank {kungfu.rank()} decided batch {kungfu.rank() + 1}",
                  f"Local: batch {kungfu.rank() + 1}"],
                 lambda: runner.after_step({"x": kungfu.rank() + 1}), "a policy that disagrees")


def not_elastic() -> None:
    runner = PolicyRunner(["scheduled_resize:schedule=2:1"])
    runner.before_step()
    check(runner.after_step() == [], "no resize before step 2")
    runner.before_step()
    expect_error(kungfu.InvalidArgumentError, ["scheduled_resize", "resize to 1", "kfrun -w"],
                 runner.after_step, "a resize outside kfrun -w")


def bad_input() -> None:
    expect_error(ValueError, ["unknown policy 'nope'", "adaptive_batch_size", "scheduled_resize"],
                 lambda: PolicyRunner(["nope"]), "an unknown policy")
    expect_error(ValueError, ["policy adaptive_batch_size", "parameter 'interval'", "'x'"],
                 lambda: PolicyRunner(["adaptive_batch_size:interval=x"]), "a bad number")
    expect_error(ValueError, ["policy adaptive_batch_size", "unknown parameter 'intervl'",
                              "min_batch"],
                 lambda: PolicyRunner(["adaptive_batch_size:intervl=3"]), "an unknown parameter")
    expect_error(ValueError, ["policy adaptive_strategy", "parameter 'alternative'"],
                 lambda: PolicyRunner(["adaptive_strategy:alternative=bogus"]), "a bad value")
    expect_error(ValueError, ["policy scheduled_resize", "parameter 'schedule'"],
                 lambda: PolicyRunner(["scheduled_resize"]), "a missing parameter")
    expect_error(ValueError, ["policy adaptive_batch_size", "lr_rule"],
                 lambda: PolicyRunner(["adaptive_batch_size:lr_rule=cubic"]), "a bad option")
    expect_error(TypeError, ["42", "BasePolicy"], lambda: PolicyRunner([42]), "not a policy")
    expect_error(ValueError, ["unknown strategy 'NOPE'", "RING"],
                 lambda: SwitchStrategy("NOPE"), "a bad strategy")
    expect_error(ValueError, ["name or a forest"], lambda: SwitchStrategy(), "no strategy")

    class NotAnAction(BasePolicy):
        def after_step(self, metrics, sums, state):
            return ["batch 3"]

    runner = PolicyRunner([NotAnAction()])
    expect_error(TypeError, ["policy NotAnAction", "after_step", "'batch 3'", "not an action"],
                 runner.after_step, "a non-action")

    class Words(BasePolicy):
        name = "words"

        def contribute(self, metrics, state):
            return ["a"]

    runner = PolicyRunner([Words()])
    expect_error(TypeError, ["policy words", "contribute", "not a list of numbers"],
                 runner.after_step, "non-numbers")

    class Raises(BasePolicy):
        def contribute(self, metrics, state):
            return [1 / 0]

    runner = PolicyRunner([Raises()])
    expect_error(ZeroDivisionError, [], runner.after_step, "a policy's own error")
    runner = PolicyRunner(["adaptive_batch_size"])
    expect_error(TypeError, ["metric 'gns'", "not a number"],
                 lambda: runner.after_step({"gns": "high"}), "a bad metric")
    check(Resize(3) == Resize(3) and Resize(3) != Resize(4), "action equality")
    check(SetLearningRate(0.5).describe() == "lr 0.5", "describe")


def elastic() -> None:
    from kungfu.torch.elastic import State, run
    total = 8
    torch.manual_seed(1)
    model = torch.nn.Linear(4, 2)
    opt = kt.SynchronousSGDOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                     named_parameters=model.named_parameters())
    state = State(model, opt, step=0)
    first = kungfu.strategy()

    class SwitchAt1(BasePolicy):
        def after_step(self, metrics, sums, state):
            return [SwitchStrategy("RING")] if state.step == 1 else []

    # The switch before the first resize: a new cluster starts on the configured strategy.
    runner = PolicyRunner([SwitchAt1(), "scheduled_resize:schedule=3:3,6:1"], batch_size=4,
                          optimizer=opt, elastic_state=state)
    state.register(runner)
    runner.before_train()
    g = torch.Generator().manual_seed(2)
    xs, ys = torch.randn(64, 4, generator=g), torch.randint(0, 2, (64,), generator=g)

    @run
    def train(state: State) -> int:
        check(runner.step == state.step, f"runner step {runner.step}, state step {state.step}")
        check(kungfu.strategy() == first == runner.state.strategy,
              f"strategy {kungfu.strategy()} ({runner.state.strategy}) at {runner.step}")
        if kungfu.rank() == 0:
            print(f"synced: size {kungfu.size()} step {runner.step}", flush=True)
        while runner.step < total:
            runner.before_step()
            opt.zero_grad()
            i = (runner.step * kungfu.size() + kungfu.rank()) % 16 * 4
            torch.nn.functional.cross_entropy(model(xs[i:i + 4]), ys[i:i + 4]).backward()
            opt.step()
            state.step += 1  # before the round: a resize raises out of after_step
            runner.after_step()
        return runner.step

    steps = train(state)
    if steps is None:
        check(runner.detached, "detached")
        return
    check(steps == total and kungfu.size() == 1, f"{steps} steps on {kungfu.size()}")
    got = [(step, who, a.describe()) for step, who, a in runner.history]
    want = [(2, "SwitchAt1", "switch RING"), (3, "scheduled_resize", "resize 3"),
            (6, "scheduled_resize", "resize 1")]
    check(got == want, f"history {got}")
    print(f"trained {steps} steps", flush=True)


CHECKS = {"agree": agree, "switch": switch, "settings": settings, "disagree": disagree,
          "not-elastic": not_elastic, "bad-input": bad_input, "elastic": elastic}


def main() -> None:
    torch.set_num_threads(1)
    kungfu.init(timeout=30)
    for name in sys.argv[1:]:
        CHECKS[name]()
        print(f"{name} ok", flush=True)


if __name__ == "__main__":
    main()
