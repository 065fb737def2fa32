"""The faults a chaos run injects, drawn from its seed, and their application while the job runs.
A fault fires once the job has journaled its trigger step, after a random delay:

  none         no fault: the control (the job must succeed)
  kill_worker  SIGKILL of a live worker
  kill_runner  SIGKILL of a kfrun (its workers die with it: PR_SET_DEATHSIG)
  kill_config  SIGKILL of the standalone config server (kfconfig)
  stop_worker  SIGSTOP of a live worker for longer than the collective deadline, then SIGCONT
  veth_flap    a namespace's link down for a while, then up (netns world only)
  resize_race  a resize proposed while another is in flight: `bump` PUTs the stored cluster back
               (a version bump) just as the scheduled resize runs; `foreign` PUTs a cluster of
               another size that no worker proposed; `policy` schedules a shrink and the same
               worker back on consecutive steps

Each application records whether it happened (`applied`), whether the job had already finished
training (`late`: then it may not change the outcome) and whether it hit a member of the training
cluster (`member`: a killed or stopped member must fail the job)."""

from __future__ import annotations

import json
import random
import signal
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional, Protocol

import procs
from progress import Row, read_journals, started_workers, training_state

KINDS = ["none", "kill_worker", "kill_runner", "kill_config", "stop_worker", "veth_flap",
         "resize_race"]
RACE_VARIANTS = ["bump", "foreign", "policy"]
# Faults that stop a job they hit (unless it had finished training): a lost member.
MUST_FAIL = {"kill_worker", "kill_runner", "stop_worker"}


@dataclass
class FaultPlan:
    """What to inject and when (all drawn from the run's seed)."""

    kind: str
    variant: str = ""
    trigger_step: int = 1
    delay_s: float = 0.0
    pick: float = 0.0  # which target: an index into the live candidates, as a fraction
    hold_s: float = 0.0  # stop_worker, veth_flap: how long


@dataclass
class FaultOutcome:
    """What the application did."""

    applied: bool = False
    late: bool = False
    member: bool = False
    bystanders: bool = False  # kill_runner: members lived under other runners too
    at_step: int = -1
    target: str = ""
    detail: str = "not fired"

    def as_dict(self) -> dict:
        """For the run's JSON record."""
        return asdict(self)


class RunHandle(Protocol):
    """What the fault engine needs of a running job (run.py's Run)."""

    world: object
    steps: int
    first_port: int
    runner_procs: list
    config_proc: object

    def logs(self) -> list: ...
    def records(self) -> object: ...
    def config_request(self, method: str, body: Optional[str] = None) -> tuple[int, str]: ...


def draw_plan(rng: random.Random, kind: str, variant: str, steps: int,
              schedule: list[tuple[int, int]], deadline_s: float) -> FaultPlan:
    """When and how long: a resize race fires at the first scheduled resize (bump and foreign
    within a few milliseconds of the step before it), others at a random step."""
    plan = FaultPlan(kind=kind, variant=variant, pick=rng.random())
    if kind == "resize_race":
        first = schedule[0][0]
        plan.trigger_step = first if variant == "policy" else first - 1
        plan.delay_s = rng.uniform(0.0, 0.04)
        return plan
    plan.trigger_step = rng.randint(1, steps - 4)
    plan.delay_s = rng.uniform(0.0, 0.05)
    if kind == "stop_worker":
        plan.hold_s = deadline_s + rng.uniform(1.0, 2.5)
    elif kind == "veth_flap":
        plan.hold_s = rng.uniform(0.3, 2.0 * deadline_s)
    return plan


def _pick(items: list, fraction: float):
    return items[min(int(fraction * len(items)), len(items) - 1)]


def _is_member(rows: list[Row], worker: str, top: int) -> bool:
    """Whether `worker` is still training: it journaled the job's last step, or the one before
    and was not dropped by a shrink after it (a shrink keeps the lowest ranks)."""
    mine = [r for r in rows if r.worker == worker]
    if not mine:
        return False
    last = max(mine, key=lambda r: r.step)
    if last.step >= top:
        return True
    now = [r.cluster_size for r in rows if r.step == top]
    return last.step == top - 1 and (not now or last.rank < now[0])


class FaultEngine:
    """Fires one plan against a running job; tick() from the driver's loop."""

    def __init__(self, plan: FaultPlan, run: RunHandle) -> None:
        self.plan = plan
        self.run = run
        self.outcome = FaultOutcome()
        self.seen_at: Optional[float] = None
        self.undo: Optional[tuple[float, Callable[[], None]]] = None
        self.done = plan.kind == "none"
        if self.done:
            self.outcome.detail = "no fault"

    def tick(self, now: float) -> None:
        """Fires when due; undoes a stop or a link down when its time has come."""
        if self.undo is not None and now >= self.undo[0]:
            self.undo[1]()
            self.undo = None
        if self.done:
            return
        if self.seen_at is None:
            top, _ = training_state(read_journals(self.run.records()), self.run.steps)
            if top >= self.plan.trigger_step:
                self.seen_at = now
            return
        if now - self.seen_at >= self.plan.delay_s:
            self.done = True
            self.fire(now)

    def finish(self) -> None:
        """Undoes what is still pending (a SIGCONT, a link up) before the run is judged."""
        if self.undo is not None:
            self.undo[1]()
            self.undo = None
        if not self.done:
            self.outcome.detail = f"not fired: the job never reached step {self.plan.trigger_step}"

    def fire(self, now: float) -> None:
        """Applies the plan now."""
        rows = read_journals(self.run.records())
        top, finished = training_state(rows, self.run.steps)
        o = self.outcome
        o.at_step, o.late = top, finished
        getattr(self, "_" + self.plan.kind)(rows, top, now)

    def _live_workers(self) -> list:
        return [s for s in started_workers(self.run.logs()) if procs.alive(s.pid)]

    def _signal_worker(self, rows: list[Row], top: int, sig: int) -> Optional[int]:
        live = self._live_workers()
        o = self.outcome
        if not live:
            o.detail = "no live worker"
            return None
        s = _pick(live, self.plan.pick)
        if not procs.signal_pid(s.pid, sig):
            o.detail = f"{s.worker} (pid {s.pid}) exited first"
            return None
        o.applied, o.target = True, s.worker
        o.member = _is_member(rows, s.worker, top) or not any(r.worker == s.worker for r in rows)
        if sig == signal.SIGSTOP:
            # A stop only fails the job through a peer's deadline: a cluster of one just waits.
            o.member = o.member and max((r.cluster_size for r in rows if r.step == top),
                                        default=2) >= 2
        o.detail = f"{signal.Signals(sig).name} {s.worker} (pid {s.pid}) after step {top}"
        return s.pid

    def _kill_worker(self, rows: list[Row], top: int, now: float) -> None:
        self._signal_worker(rows, top, signal.SIGKILL)

    def _stop_worker(self, rows: list[Row], top: int, now: float) -> None:
        pid = self._signal_worker(rows, top, signal.SIGSTOP)
        if pid is not None:
            self.outcome.detail += f" for {self.plan.hold_s:.1f}s"
            self.undo = (now + self.plan.hold_s, lambda: procs.signal_pid(pid, signal.SIGCONT))

    def _kill_runner(self, rows: list[Row], top: int, now: float) -> None:
        o = self.outcome
        live = [i for i, p in enumerate(self.run.runner_procs) if p.poll() is None]
        if not live:
            o.detail = "no live runner"
            return
        i = _pick(live, self.plan.pick)
        workers = self._live_workers()
        hosted = [s for s in workers if s.runner == i]
        others = [s for s in workers if s.runner != i]
        if not procs.signal_pid(self.run.runner_procs[i].pid, signal.SIGKILL):
            o.detail = f"runner {i} exited first"
            return
        o.applied, o.target = True, f"runner {i}"
        o.member = any(_is_member(rows, s.worker, top) for s in hosted)
        o.bystanders = any(_is_member(rows, s.worker, top) for s in others)
        o.detail = (f"SIGKILL runner {i} ({self.run.world.hosts[i]}, "
                    f"{len(hosted)} live workers) after step {top}")

    def _kill_config(self, rows: list[Row], top: int, now: float) -> None:
        o = self.outcome
        p = self.run.config_proc
        if p is None or not procs.signal_pid(p.pid, signal.SIGKILL):
            o.detail = "no live config server"
            return
        o.applied, o.target = True, "kfconfig"
        o.detail = f"SIGKILL kfconfig after step {top}"

    def _veth_flap(self, rows: list[Row], top: int, now: float) -> None:
        o = self.outcome
        world = self.run.world
        host = _pick(list(range(len(world.hosts))), self.plan.pick)
        world.link(host, False)
        o.applied, o.target = True, world.hosts[host]
        o.member = any(s.runner == host for s in self._live_workers())
        o.detail = f"link of {world.hosts[host]} down for {self.plan.hold_s:.1f}s after step {top}"
        self.undo = (now + self.plan.hold_s, lambda: world.link(host, True))

    def _resize_race(self, rows: list[Row], top: int, now: float) -> None:
        o = self.outcome
        if self.plan.variant == "policy":
            o.applied, o.target = True, "scheduled_resize"
            o.detail = f"back-to-back resizes reached at step {top}"
            return
        status, text = self.run.config_request("GET")
        if status != 200:
            o.detail = f"GET /config: {status} {text.strip()[:80]}"
            return
        spec = json.loads(text)
        if self.plan.variant == "foreign":
            spec["workers"] = self._other_size(spec["workers"])
        t0 = time.monotonic()
        status, text = self.run.config_request("PUT", json.dumps(spec))
        if status != 200:
            o.detail = f"PUT /config: {status} {text.strip()[:80]}"
            return
        stored = json.loads(text)
        o.applied, o.target = True, "config server"
        o.detail = (f"{self.plan.variant}: PUT {len(spec['workers'])} workers over version "
                    f"{spec.get('version', '0')} -> {stored.get('version')} after step {top} "
                    f"({(time.monotonic() - t0) * 1000:.0f} ms)")

    def _other_size(self, workers: list[dict]) -> list[dict]:
        """The workers with one added on a free slot, or the last one dropped when all are
        taken."""
        world = self.run.world
        for host in world.hosts:
            used = {w["port"] for w in workers if w["host"] == host}
            for j in range(world.slots):
                port = self.run.first_port + j
                if port not in used:
                    return workers + [{"host": host, "port": port}]
        return workers[:-1]
