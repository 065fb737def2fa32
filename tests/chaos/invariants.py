"""The invariants every chaos run must keep, judged from its logs, journals and records:

  bound      the run ended within its bound (else a hang: everything left was killed)
  orphans    no process outlived the runners
  exit code  0 when no fault could stop the job (the control, a fault that missed); non-zero
             when a fault lost a member of the training cluster before training finished; a
             runner that exits non-zero names the cause (kfrun's "failed with exit code" line,
             and the worker's own "kftrain: ..." error for a worker that failed by itself); a
             SIGKILLed worker is named by its runner; a runner that exits 0 had every worker of
             its own either finish the last step or leave a resized cluster
  gradients  no allreduce result was wrong (kftrain -verify: no "verify:" error)
  agreement  every worker that finished a step holds the same parameters after it (the
             journal's digest) and the same cluster size; no rank twice
  records    steps are journaled from 0 without gaps, each by its whole cluster, except the
             last step of a lost job; each worker process's journal has no gap; a worker that
             exited by itself wrote steps.csv and summary.json matching its journal
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from faults import MUST_FAIL, FaultEngine
from progress import EXITED, Row, Started, read_csv, read_journals, started_workers
from run import Ended, Run

CAUSE = re.compile(r"^\[kfrun\] (rank \d+ \(.*\) failed with exit code|timeout:|got signal)")


@dataclass
class Verdict:
    """A run's outcome and the invariants it broke."""

    outcome: str  # completed, lost or hang
    violations: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)  # the errors that named why a job was lost

    def ok(self) -> bool:
        """No invariant broken."""
        return not self.violations


def _tag(worker: str, stream: str) -> str:
    host, _, port = worker.rpartition(":")
    return f"[{host}.{port}::{stream}] "


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def judge(run: Run, ended: Ended, engine: FaultEngine) -> Verdict:
    """Judges a finished run."""
    fault = engine.outcome
    killed_runner = None
    if engine.plan.kind == "kill_runner" and fault.applied:
        killed_runner = int(fault.target.split()[1])
    logs = [_read(p) for p in run.logs()]
    codes = ended.codes
    lost = any(c != 0 for i, c in enumerate(codes)) or killed_runner is not None
    v = Verdict("hang" if ended.hang else "lost" if lost else "completed")
    if ended.error:
        v.violations.append(f"setup: {ended.error}")
    if ended.hang:
        v.violations.append("hang: still running at the bound: " + "; ".join(ended.left_at_bound))
    for o in ended.orphans:
        v.violations.append(f"orphan: {o} outlived the runners")
    rows = read_journals(run.records())
    workers = started_workers(run.logs())
    _check_exit_codes(engine, logs, codes, killed_runner, workers, rows, run.steps, v)
    for i, text in enumerate(logs):
        for line in text.splitlines():
            if "verify:" in line:
                v.violations.append(f"wrong gradient (runner {i}): {line.strip()[:200]}")
    _check_agreement(rows, run.steps, v)
    _check_records(run, workers, rows, v)
    return v


def _check_exit_codes(engine: FaultEngine, logs: list[str], codes: list, killed_runner,
                      workers: list[Started], rows: list[Row], steps: int, v: Verdict) -> None:
    fault, kind = engine.outcome, engine.plan.kind
    control = kind == "none" or not fault.applied
    for i, (code, text) in enumerate(zip(codes, logs)):
        if i == killed_runner or code is None:
            continue
        if code != 0 and control:
            v.violations.append(f"unexpected loss: runner {i} exited {code} with no fault "
                                f"applied ({fault.detail})")
        if code != 0:
            _check_named(i, code, text, v)
        else:
            _check_zero(i, text, workers, rows, steps, v)
    if (kind in MUST_FAIL and fault.applied and fault.member and not fault.late
            and v.outcome == "completed"):
        v.violations.append(f"fault hidden: every runner exited 0 after {fault.detail}")
    if (kind == "kill_runner" and fault.applied and fault.member and fault.bystanders
            and not fault.late and all(c == 0 for i, c in enumerate(codes) if i != killed_runner)):
        v.violations.append(f"fault hidden: the other runners exited 0 after {fault.detail}, "
                            f"which took members of the cluster their workers trained in")
    if kind == "kill_worker" and fault.applied:
        needle = f"({fault.target}) failed with exit code 137 (signal 9)"
        if not any(needle in text for text in logs):
            v.violations.append(f"kill not named: no runner says {needle}")


def _check_named(runner: int, code: int, text: str, v: Verdict) -> None:
    """A runner that exited non-zero says why, and a worker that failed by itself says why."""
    lines = text.splitlines()
    causes = [line for line in lines if CAUSE.match(line)]
    if not causes:
        v.violations.append(f"unnamed cause: runner {runner} exited {code} without a "
                            f"[kfrun] failure line")
        return
    for line in lines:
        m = EXITED.match(line)
        if not m or "failed with" not in line or m.group(3) not in ("1", "2"):
            continue
        tag = _tag(m.group(2), "stderr") + "kftrain: "
        said = [x for x in lines if x.startswith(tag)]
        if not said:
            v.violations.append(f"unnamed cause: {m.group(2)} failed with code {m.group(3)} "
                                f"and printed no error")
        v.causes.extend(x[len(tag):].strip()[:160] for x in said[:1])


def _check_zero(runner: int, text: str, workers: list[Started], rows: list[Row], steps: int,
                v: Verdict) -> None:
    """A runner exiting 0: each of its workers that exited 0 finished the last step or was
    detached (left a resized cluster)."""
    for w in workers:
        if w.runner != runner or w.code != 0:
            continue
        mine = [r.step for r in rows if r.pid == w.pid]
        detached = (_tag(w.worker, "stdout") + "kftrain: detached") in text
        if not detached and (not mine or max(mine) != steps - 1):
            v.violations.append(f"early exit 0: runner {runner}'s {w.worker} (pid {w.pid}) exited "
                                f"0 after step {max(mine) if mine else 'none'} of {steps}, not "
                                f"detached")


def _check_agreement(rows: list[Row], steps: int, v: Verdict) -> None:
    by_step: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        by_step[r.step].append(r)
    if not by_step:
        if v.outcome == "completed":
            v.violations.append("records: a completed job journaled no step")
        return
    top = max(by_step)
    missing = [s for s in range(top + 1) if s not in by_step]
    if missing:
        v.violations.append(f"records: steps {missing[:5]} journaled by nobody (up to {top})")
    if v.outcome == "completed" and top != steps - 1:
        v.violations.append(f"records: a completed job's last step is {top}, not {steps - 1}")
    for s in sorted(by_step):
        group = by_step[s]
        digests = {r.digest for r in group}
        sizes = {r.cluster_size for r in group}
        ranks = [r.rank for r in group]
        if len(digests) > 1:
            held = ", ".join(f"{r.worker}={r.digest[:8]}" for r in group)
            v.violations.append(f"divergence: step {s}: workers hold {len(digests)} different "
                                f"parameter digests ({held})")
        if len(sizes) > 1:
            v.violations.append(f"divergence: step {s}: cluster sizes {sorted(sizes)}")
        if len(set(ranks)) != len(ranks):
            v.violations.append(f"divergence: step {s}: ranks {sorted(ranks)}")
        size = max(sizes)
        if len(group) != size and not (s == top and v.outcome != "completed"):
            v.violations.append(f"records: step {s} journaled by {len(group)} of {size} workers")
    per_pid: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        per_pid[r.pid].append(r.step)
    for pid, mine in per_pid.items():
        if mine != list(range(mine[0], mine[0] + len(mine))):
            v.violations.append(f"records: pid {pid} journaled steps {mine[:3]}... with a gap")


def _check_records(run: Run, workers: list[Started], rows: list[Row], v: Verdict) -> None:
    """A worker that exited by itself (its runner saw code 0 or 1) wrote records that match its
    journal; only an address's last run is checked (a run started again overwrites them)."""
    last: dict[str, Started] = {}
    for w in workers:
        last[w.worker] = w
    for worker, w in last.items():
        if w.code not in (0, 1):
            continue
        host, _, port = worker.rpartition(":")
        d = run.records() / f"{host}.{port}"
        try:
            summary = json.loads((d / "summary.json").read_text())
        except (OSError, ValueError):
            summary = {}
        if summary.get("pid") != w.pid:
            v.violations.append(f"records missing: {worker} (pid {w.pid}) exited {w.code} "
                                f"without its summary.json")
            continue
        journaled = sorted((r.step, r.rank) for r in rows if r.pid == w.pid)
        recorded = sorted((int(r["step"]), int(r["rank"])) for r in read_csv(d / "steps.csv"))
        if journaled != recorded:
            v.violations.append(f"records differ: {worker}: steps.csv has {len(recorded)} steps, "
                                f"the journal {len(journaled)}")
        if w.code == 0 and summary.get("errors"):
            v.violations.append(f"records: {worker} exited 0 with errors {summary['errors']}")
