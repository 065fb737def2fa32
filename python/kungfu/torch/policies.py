"""Adaptation policies in a Python training loop: the C++ policies by name and policies written in
Python, through the agreement round kfsim and kftrain run.

    runner = kt.PolicyRunner(["adaptive_batch_size:interval=20,max_batch=256"],
                             batch_size=32, optimizer=opt, monitors=[gns])
    runner.before_train()
    for epoch in range(epochs):
        runner.before_epoch(epoch)
        for ...:
            runner.before_step()
            ...                                   # a step on runner.batch_size samples
            runner.after_step({"gns": gns.noise_scale})
            if runner.stopped:
                break
        runner.after_epoch()
    runner.after_train()

After a step every policy contributes numbers (contribute), one allreduce sums them over the
workers (named "kf.policy/<step>", as the C++ runner's), every policy decides from the identical
sums (after_step), and a consensus on the encoded actions ("kf.policy.agree/<step>") checks that
every worker decided the same; a worker whose policies decided otherwise makes every worker raise
kungfu.ProtocolError instead of going on split. The runner then applies the actions on every
worker before the next step: a strategy switch (kungfu.set_strategy), the batch size
(runner.batch_size, and the batch_size of the monitors given), the learning rate (the optimizer's
param_groups), a stop (runner.stopped), a resize (kungfu.resize, under `kfrun -w`); each policy is
told of each (applied).

Every hook runs on the caller's thread: a Python policy never runs on the runtime's event loop.
"""

from __future__ import annotations

import inspect
import os
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

import kungfu
from kungfu import _core
from kungfu._core import (PolicyStack, Resize, SetBatchSize, SetLearningRate, StepMetrics,
                          StopTraining, SwitchStrategy, TrainingState)

__all__ = ["PolicyRunner", "BasePolicy", "TrainingState", "StepMetrics", "SwitchStrategy",
           "Resize", "SetBatchSize", "SetLearningRate", "StopTraining", "Action", "policy_names"]

Action = Union[SwitchStrategy, Resize, SetBatchSize, SetLearningRate, StopTraining]

# StepMetrics fields a metrics dict may set; any other key is a named value (StepMetrics.values).
_METRIC_FIELDS = ("samples", "step_seconds", "compute_seconds", "samples_per_second",
                  "period_seconds", "collective_bytes", "collective_span_seconds",
                  "collective_throughput", "latency_seconds", "egress_bps", "ingress_bps")


def policy_names() -> List[str]:
    """The C++ policies PolicyRunner knows by name (policies/registry.h)."""
    return list(_core.policy_names())


class BasePolicy:
    """A policy written in Python, in the same stack as the C++ ones (KungFu's hooks).

    Override what the policy needs. The contract is the C++ one (policies/policy.h):
    contribute() returns this worker's numbers, the same length on every worker at every step;
    after_step() decides only from `sums` (the contributions summed over the workers), the state
    and the policy's own history, so that every worker decides the same actions; save_state()
    holds that history as numbers, so that a worker joining after a resize takes rank 0's.
    `name` (default: the class's name) is what errors call the policy.
    """

    name: Optional[str] = None

    def before_train(self, state: TrainingState) -> None:
        """Once, before the first step."""

    def before_epoch(self, state: TrainingState) -> None:
        """Before the first step of each epoch."""

    def before_step(self, state: TrainingState) -> None:
        """Before each step; state.step is the step about to run."""

    def contribute(self, metrics: StepMetrics, state: TrainingState) -> Sequence[float]:
        """This worker's numbers for the cluster-wide sums after_step receives."""
        return []

    def after_step(self, metrics: StepMetrics, sums: Sequence[float],
                   state: TrainingState) -> Sequence[Action]:
        """After each step (state.step is the step just run): the actions to take, decided from
        `sums`, the same on every worker. `metrics` are this worker's, for reading only: deciding
        from them would break the agreement."""
        return []

    def after_epoch(self, state: TrainingState) -> None:
        """After the last step of each epoch."""

    def after_train(self, state: TrainingState) -> None:
        """Once, after the last step."""

    def applied(self, action: Action, state: TrainingState) -> None:
        """Told once the runner has applied an action (any policy's), at the start of
        state.step, on every worker."""

    def save_state(self) -> Sequence[float]:
        """The history decisions depend on, for workers that join later."""
        return []

    def load_state(self, values: Sequence[float]) -> None:
        """Takes a history save_state() returned (rank 0's, after a resize)."""


def _max_cluster_size() -> int:
    """What the world can hold: the slots kfrun -w lists (KUNGFU_HOST_SLOTS, "ip:slots,..."),
    else the cluster's size."""
    slots = os.environ.get("KUNGFU_HOST_SLOTS", "") if kungfu.elastic() else ""
    total = 0
    for entry in filter(None, slots.split(",")):
        try:
            total += int(entry.rsplit(":", 1)[1])
        except (IndexError, ValueError):
            return kungfu.size()
    return max(total, kungfu.size())


class PolicyRunner:
    """A stack of policies (C++ ones by name, "adaptive_batch_size:interval=10,max_batch=256",
    and BasePolicy objects, in stack order) run by the loop's hooks, applying the actions they
    agree on.

    `batch_size` and `learning_rate` are the initial settings (the learning rate defaults to the
    optimizer's first group's); `optimizer` gets every learning-rate change; `monitors` (e.g. a
    GradientNoiseScale) get every batch-size change as their `batch_size`. `total_steps` is what
    policies see as state.total_steps. `max_cluster_size` is the most workers a resize may ask
    for (default: the slots of `kfrun -w`, else the current size). `elastic_state`, a
    kungfu.torch.elastic.State that has this runner registered, makes a resize raise its
    ClusterResized (WorkerDetached on a worker that left), so that elastic.run syncs the workers
    and calls the training function again. Needs kungfu.init() first. Bad policy names or
    parameters raise ValueError naming the policy and the parameter.
    """

    def __init__(self, policies: Sequence[Union[str, BasePolicy]], *, batch_size: int = 0,
                 learning_rate: Optional[float] = None, optimizer: Any = None,
                 monitors: Sequence[Any] = (), total_steps: int = 0, step: int = 0,
                 epoch: int = 0, max_cluster_size: Optional[int] = None,
                 elastic_state: Any = None) -> None:
        policies = [policies] if isinstance(policies, (str, BasePolicy)) else list(policies)
        for p in policies:
            if not isinstance(p, (str, BasePolicy)):
                raise TypeError(f"kungfu.torch.PolicyRunner: {p!r} is neither a policy's name "
                                "(e.g. \"adaptive_batch_size:interval=10\") nor a BasePolicy")
        self._stack = PolicyStack(policies)
        self.optimizer = optimizer
        self.monitors = list(monitors)
        self.elastic_state = elastic_state
        if learning_rate is None:
            learning_rate = float(optimizer.param_groups[0]["lr"]) if optimizer is not None else 0.0
        s = TrainingState()
        s.step, s.epoch, s.total_steps = int(step), int(epoch), int(total_steps)
        s.batch_per_worker, s.learning_rate = int(batch_size), float(learning_rate)
        s.configured_strategy = _core.named_strategy()
        s.strategy = kungfu.strategy()
        self._state = s
        self._max_cluster_size = max_cluster_size
        self._refresh_cluster()
        self.stopped = False
        self.stop_reason = ""
        self.detached = False
        #: (step, policy name, action) of every action applied, in order.
        self.history: List[Tuple[int, str, Action]] = []
        #: The last round's contributions summed over the workers, every policy's in stack order
        #: (what kfsim's steps.csv records as policy_sums).
        self.sums: List[float] = []
        self._step_began: Optional[float] = None
        self._last_step_end: Optional[float] = None

    # ---- what the loop reads ----

    @property
    def names(self) -> List[str]:
        """The policies' names, in stack order."""
        return list(self._stack.names)

    @property
    def state(self) -> TrainingState:
        """The TrainingState policies see (the runner's own: read it, do not change it)."""
        return self._state

    @property
    def step(self) -> int:
        """The next step to run (after after_step: the step just run + 1)."""
        return self._state.step

    @property
    def epoch(self) -> int:
        """The current epoch."""
        return self._state.epoch

    @property
    def batch_size(self) -> int:
        """The batch size per worker the policies agreed on: what the next step should use."""
        return self._state.batch_per_worker

    @property
    def learning_rate(self) -> float:
        """The learning rate the policies agreed on (already set on the optimizer, if given)."""
        return self._state.learning_rate

    # ---- hooks ----

    def before_train(self) -> None:
        """Before the first step (a worker joining after a resize calls it too, before it syncs)."""
        self._stack.before_train(self._state)

    def before_epoch(self, epoch: Optional[int] = None) -> None:
        """Before each epoch's first step; `epoch` sets the epoch number (default: counted)."""
        if epoch is not None:
            self._state.epoch = int(epoch)
        self._stack.before_epoch(self._state)

    def before_step(self) -> None:
        """Before each step: starts the step's clock (the step time after_step reports)."""
        self._step_began = time.perf_counter()
        self._stack.before_step(self._state)

    def after_step(self, metrics: Union[None, Mapping[str, Any], StepMetrics] = None
                   ) -> List[Action]:
        """After each step, on every worker: the agreement round (two small collectives), then
        the agreed actions applied. Returns them (the same list on every worker).

        `metrics` are this worker's: a StepMetrics, or a dict of StepMetrics fields (samples,
        step_seconds, samples_per_second, collective_throughput, ...) and named values such as
        {"gns": noise_scale} (None values are left out). Unset, the step time is the time since
        before_step, the samples runner.batch_size, and the period the time since the previous
        after_step. Raises kungfu.ProtocolError when the workers' policies decided differently.
        """
        local = self._metrics(metrics)
        state = self._state
        step = int(state.step)
        values = self._stack.contributions(local, state)
        if values:
            sums = kungfu.allreduce(np.asarray(values, dtype=np.float64), "sum",
                                    name=PolicyStack.sums_name(step))
        else:
            sums = np.zeros(0, dtype=np.float64)
        self.sums = sums.tolist()
        actions, asked_by, encoded = self._stack.decide(local, self.sums, state)
        agreed = kungfu.consensus(np.frombuffer(encoded, dtype=np.uint8).copy(),
                                  name=PolicyStack.agreement_name(step))
        if not agreed:
            mine = "; ".join(f"{self.names[i]}: {a.describe()}" for a, i in zip(actions, asked_by))
            raise kungfu.ProtocolError(
                f"kungfu.torch.PolicyRunner, step {step}: "
                f"{PolicyStack.disagreement(kungfu.rank(), actions)} (this worker's actions: "
                f"{mine or 'none'})")
        state.step = step + 1
        self._apply(actions, asked_by)
        return list(actions)

    def after_epoch(self) -> None:
        """After each epoch's last step; counts the epoch."""
        self._stack.after_epoch(self._state)
        self._state.epoch += 1

    def after_train(self) -> None:
        """After the last step."""
        self._stack.after_train(self._state)

    # ---- state for joining workers ----

    def state_dict(self) -> Dict[str, Any]:
        """The progress, the agreed settings and every policy's history (plain numbers), for
        kungfu.torch.elastic.State.register or a checkpoint."""
        s = self._state
        return {"step": int(s.step), "epoch": int(s.epoch), "batch_size": int(s.batch_per_worker),
                "learning_rate": float(s.learning_rate), "stopped": self.stopped,
                "stop_reason": self.stop_reason, "policies": list(self._stack.save_state())}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Takes what state_dict() returned (on another worker: the same stack of policies)."""
        s = self._state
        s.step, s.epoch = int(state["step"]), int(state["epoch"])
        self._set_batch_size(int(state["batch_size"]))
        self._set_learning_rate(float(state["learning_rate"]))
        self.stopped, self.stop_reason = bool(state["stopped"]), str(state["stop_reason"])
        try:
            self._stack.load_state([float(v) for v in state["policies"]])
        except ValueError as e:
            raise ValueError(f"kungfu.torch.PolicyRunner.load_state_dict: {e} "
                             f"(this stack: {', '.join(self.names)})") from None
        self._refresh_cluster()

    def sync(self, root: int = 0) -> None:
        """Every worker takes root's state_dict(): after a resize, for a loop that does not sync
        through kungfu.torch.elastic.State. A collective."""
        from kungfu.torch.ops import broadcast_object
        state = broadcast_object(self.state_dict(), root, name="kungfu.policies/state")
        if kungfu.rank() != root:
            self.load_state_dict(state)

    # ---- applying ----

    def _metrics(self, metrics: Union[None, Mapping[str, Any], StepMetrics]) -> StepMetrics:
        now = time.perf_counter()
        if isinstance(metrics, StepMetrics):
            m = metrics
        else:
            m = StepMetrics()
            values = {}
            for key, value in (metrics or {}).items():
                if value is None:
                    continue
                if key in _METRIC_FIELDS:
                    setattr(m, key, value)
                else:
                    try:
                        values[str(key)] = float(value)
                    except (TypeError, ValueError):
                        raise TypeError(f"kungfu.torch.PolicyRunner.after_step: metric {key!r} "
                                        f"is {value!r}, not a number") from None
            m.values = values
        s = self._state
        m.step, m.rank, m.cluster_size = s.step, s.rank, s.cluster_size
        m.strategy, m.batch_per_worker, m.learning_rate = (s.strategy, s.batch_per_worker,
                                                           s.learning_rate)
        if m.samples == 0:
            m.samples = s.batch_per_worker
        if m.step_seconds == 0:
            began = self._step_began if self._step_began is not None else self._last_step_end
            if began is not None:
                m.step_seconds = now - began
        if m.period_seconds == 0:
            m.period_seconds = (now - self._last_step_end if self._last_step_end is not None
                                else m.step_seconds)
        if m.samples_per_second == 0 and m.step_seconds > 0:
            m.samples_per_second = m.samples / m.step_seconds
        self._step_began = None
        self._last_step_end = now
        return m

    def _refresh_cluster(self) -> None:
        s = self._state
        s.rank, s.cluster_size = kungfu.rank(), kungfu.size()
        s.max_cluster_size = (self._max_cluster_size if self._max_cluster_size is not None
                              else _max_cluster_size())
        s.host_of = list(_core.host_of())

    def _set_batch_size(self, n: int) -> None:
        self._state.batch_per_worker = n
        for m in self.monitors:
            if hasattr(m, "batch_size"):
                m.batch_size = n

    def _set_learning_rate(self, value: float) -> None:
        self._state.learning_rate = value
        if self.optimizer is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = value

    def _apply(self, actions: Sequence[Action], asked_by: Sequence[int]) -> None:
        """On every worker alike, before the next step, in stack order; a resize last."""
        s = self._state
        resize_to: Optional[Tuple[int, str]] = None
        for action, index in zip(actions, asked_by):
            who = self.names[index]
            if isinstance(action, Resize):
                resize_to = (action.workers, who)
                continue
            if isinstance(action, SwitchStrategy):
                if action.name is None:  # a spanning tree over this cluster: STAR@r, MST
                    _core.set_strategy_forest(list(action.forest), action.label)
                else:
                    kungfu.set_strategy(action.name)
                s.strategy = action.label
            elif isinstance(action, SetBatchSize):
                self._set_batch_size(action.per_worker)
            elif isinstance(action, SetLearningRate):
                self._set_learning_rate(action.value)
            elif isinstance(action, StopTraining):
                self.stopped, self.stop_reason = True, action.reason
            self.history.append((int(s.step), who, action))
            self._stack.applied(action, s)
        if resize_to is not None and resize_to[0] != s.cluster_size:
            self._resize(*resize_to)

    def _resize(self, workers: int, who: str) -> None:
        s = self._state
        resize = getattr(kungfu, "resize", None)
        if resize is None:
            raise NotImplementedError(f"kungfu.torch.PolicyRunner: policy {who} asked to resize "
                                      f"to {workers} workers; this kungfu has no resize")
        if not kungfu.elastic():
            raise kungfu.InvalidArgumentError(
                f"kungfu.torch.PolicyRunner: policy {who} asked to resize to {workers} workers at "
                f"step {s.step}, but this worker cannot resize: run it under `kfrun -w`")
        kwargs = {"step": int(s.step)} if "step" in inspect.signature(resize).parameters else {}
        changed, detached = resize(workers, **kwargs)
        if detached:
            self.detached = True
            self.stopped, self.stop_reason = True, f"left the cluster (resize to {workers})"
            if self.elastic_state is not None:
                from kungfu.torch.elastic import WorkerDetached
                raise WorkerDetached()
            return
        if not changed:
            return
        self._refresh_cluster()
        # A new cluster starts on the configured strategy, as the C++ trainer's does (what
        # adaptive_strategy assumes when told of a resize, and what joining workers start on).
        if kungfu.strategy() != s.configured_strategy:
            _core.set_strategy(s.configured_strategy)
        s.strategy = s.configured_strategy
        action = Resize(s.cluster_size)
        self.history.append((int(s.step), who, action))
        self._stack.applied(action, s)
        if self.elastic_state is not None:
            from kungfu.torch.elastic import ClusterResized
            raise ClusterResized()
