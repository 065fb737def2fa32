"""What a running or finished chaos job has done, read from its files: the steps each worker
journaled (kftrain -journal: OUT/<ip>.<port>/journal.csv, one flushed line per finished step)
and the workers each runner started (kfrun's "started rank R (ip:port) as pid P" lines)."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

STARTED = re.compile(r"^\[kfrun\] started rank (\d+) \(([\d.]+:\d+)\) as pid (\d+)$")
EXITED = re.compile(r"^\[kfrun\] rank (\d+) \(([\d.]+:\d+)\) (?:exited with|failed with exit) "
                    r"code (\d+)")


@dataclass(frozen=True)
class Row:
    """One journaled step of one worker process."""

    worker: str  # ip:port
    pid: int
    rank: int
    step: int
    cluster_size: int
    digest: str


def read_journals(records: Path) -> list[Row]:
    """Every complete journal line under `records` (a line being written is left out)."""
    rows: list[Row] = []
    if not records.is_dir():
        return rows
    for path in sorted(records.glob("*/journal.csv")):
        host, _, port = path.parent.name.rpartition(".")
        worker = f"{host}:{port}"
        try:
            text = path.read_text()
        except OSError:
            continue
        lines = text.splitlines(keepends=True)
        for line in lines[1:]:
            if not line.endswith("\n"):
                break
            f = line.strip().split(",")
            if len(f) != 5:
                continue
            rows.append(Row(worker, int(f[0]), int(f[1]), int(f[2]), int(f[3]), f[4]))
    return rows


@dataclass
class Started:
    """A worker process a runner started, and its exit code once the runner reported it."""

    runner: int
    rank: int
    worker: str
    pid: int
    code: Optional[int] = None


def started_workers(logs: list[Path]) -> list[Started]:
    """The workers each runner's log says it started, in order, with their exit codes (a
    runner reports a worker's exit before it starts the same address again)."""
    out: list[Started] = []
    for runner, path in enumerate(logs):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        running: dict[str, Started] = {}
        for line in text.splitlines():
            m = STARTED.match(line)
            if m:
                s = Started(runner, int(m.group(1)), m.group(2), int(m.group(3)))
                running[s.worker] = s
                out.append(s)
                continue
            m = EXITED.match(line)
            if m and m.group(2) in running:
                running.pop(m.group(2)).code = int(m.group(3))
    return out


def training_state(rows: list[Row], steps: int) -> tuple[int, bool]:
    """(the highest step any worker finished, whether the job finished training: its last step
    journaled by every worker of that step's cluster)."""
    if not rows:
        return -1, False
    top = max(r.step for r in rows)
    last = [r for r in rows if r.step == steps - 1]
    done = bool(last) and len({r.rank for r in last}) >= last[0].cluster_size
    return top, done


def read_csv(path: Path) -> list[dict]:
    """A CSV file's rows as dicts ([] when missing)."""
    try:
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []
