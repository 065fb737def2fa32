"""Loaders for the common output records of kfsim and of real runs (kftrain -out, kfbench --json).

A run directory written by kfsim holds steps.csv, collectives.csv, events.csv, peers.csv and
summary.json. A real run under kfrun writes one such directory per worker, DIR/<ip>.<port>/; the
loader merges them into one Run (every rank's steps, rank 0's summary). A kfsim sweep writes
OUT/sweep.csv beside one run directory per value; a scenario with variants writes one run
directory per variant. Every error names the file (and the line for CSV rows): RecordError.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

# The adaptations the runtime records (workloads/trainer.cc) and the events kfsim injects.
INJECTED_KINDS = ("contention", "straggler", "link", "fail")
ADAPTATION_KINDS = ("switch", "resize", "batch", "lr", "stop")

# A kfrun worker's directory: <ip>.<port> (kftrain -out DIR writes DIR/<ip>.<port>/).
_WORKER_DIR = re.compile(r"^[^=/\s]+\.\d{1,5}$")


class RecordError(Exception):
    """A record file is missing or malformed; the message names the file."""


@dataclass
class StepRow:
    rank: int
    step: int
    start_s: float
    end_s: float
    compute_s: float
    comm_s: float
    samples: int
    strategy: str
    cluster_size: int
    batch: int | None = None
    values: dict[str, float] = field(default_factory=dict)
    host: str = ""
    # The communication the compute did not hide. steps.csv has the column only when some step
    # overlapped (workload.bucketing other than none); without overlap it equals comm_s, which is
    # what a missing value (None) becomes.
    exposed_comm_s: float | None = None

    def __post_init__(self) -> None:
        if self.exposed_comm_s is None:
            self.exposed_comm_s = self.comm_s


@dataclass
class ClusterStep:
    """All workers' view of one step: from the first begin to the last end."""

    step: int
    start_s: float
    end_s: float
    samples: int
    workers: int
    strategy: str
    cluster_size: int
    batch: int | None

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def throughput(self) -> float:
        d = self.duration_s
        return self.samples / d if d > 0 else 0.0


@dataclass
class CollectiveRow:
    rank: int
    step: int
    name: str
    bytes: int
    start_s: float
    end_s: float
    strategy: str


@dataclass
class EventRow:
    time_s: float
    kind: str
    phase: str
    label: str
    detail: str


@dataclass
class Window:
    """An injected event's extent (contention, straggler, ...); stop None: until the end."""

    kind: str
    label: str
    start_s: float
    stop_s: float | None


@dataclass
class Run:
    path: Path
    label: str
    steps: list[StepRow]
    collectives: list[CollectiveRow]
    events: list[EventRow]
    summary: dict[str, Any]
    real: bool = False  # merged from kfrun worker directories

    def cluster_steps(self) -> list[ClusterStep]:
        by_step: dict[int, ClusterStep] = {}
        for s in self.steps:
            c = by_step.get(s.step)
            if c is None:
                by_step[s.step] = ClusterStep(s.step, s.start_s, s.end_s, s.samples, 1, s.strategy,
                                              s.cluster_size, s.batch)
                continue
            c.start_s = min(c.start_s, s.start_s)
            c.end_s = max(c.end_s, s.end_s)
            c.samples += s.samples
            c.workers += 1
            if s.rank == 0:
                c.strategy = s.strategy
                c.batch = s.batch
        return [by_step[k] for k in sorted(by_step)]

    def throughput(self, steps: Iterable[ClusterStep] | None = None) -> float:
        """Samples per second over cluster steps (total samples / total step time)."""
        chosen = list(self.cluster_steps() if steps is None else steps)
        t = sum(c.duration_s for c in chosen)
        return sum(c.samples for c in chosen) / t if t > 0 else 0.0

    def windows(self) -> list[Window]:
        """Injected events paired start -> stop by label; an 'at' event is a zero-length window."""
        out: list[Window] = []
        open_: dict[str, Window] = {}
        for e in self.events:
            if e.kind not in INJECTED_KINDS:
                continue
            if e.phase == "start":
                w = Window(e.kind, e.label, e.time_s, None)
                open_[e.label] = w
                out.append(w)
            elif e.phase == "stop" and e.label in open_:
                open_.pop(e.label).stop_s = e.time_s
            else:
                out.append(Window(e.kind, e.label, e.time_s, e.time_s))
        return out

    def adaptations(self) -> list[EventRow]:
        return [e for e in self.events if e.kind in ADAPTATION_KINDS]

    def values(self, name: str, rank: int = 0) -> list[tuple[float, int, float]]:
        """(end time s, step, value) of a monitored value (accuracy, loss, gns, ...) on one rank."""
        return [(s.end_s, s.step, s.values[name]) for s in self.steps
                if s.rank == rank and name in s.values]

    @property
    def end_s(self) -> float:
        return max((s.end_s for s in self.steps), default=0.0)


# ---------------------------------------------------------------------------------------------
# CSV helpers


def _read_csv(path: Path, required: Iterable[str]) -> list[tuple[int, dict[str, str]]]:
    """Rows of a CSV file as (line number, row); RecordError if missing, empty or short of columns."""
    if not path.is_file():
        raise RecordError(f"{path}: missing")
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            if reader.fieldnames is None:
                raise RecordError(f"{path}: empty file (no header)")
            missing = [c for c in required if c not in reader.fieldnames]
            if missing:
                raise RecordError(f"{path}: missing column(s) {', '.join(missing)}")
            rows = []
            for row in reader:
                if None in row or any(v is None for k, v in row.items() if k in required):
                    raise RecordError(f"{path}:{reader.line_num}: wrong number of fields")
                rows.append((reader.line_num, row))
            return rows
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise RecordError(f"{path}: {e}") from e


def _field(path: Path, line: int, row: dict[str, str], name: str, conv: Callable[[str], Any]) -> Any:
    text = row.get(name, "")
    try:
        value = conv(text)
    except (TypeError, ValueError):
        raise RecordError(f"{path}:{line}: column {name}: bad value {text!r}") from None
    if isinstance(value, float) and math.isnan(value):
        raise RecordError(f"{path}:{line}: column {name}: NaN")
    return value


def _values(path: Path, line: int, text: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in filter(None, text.split(";")):
        name, sep, value = part.partition("=")
        if not sep:
            raise RecordError(f"{path}:{line}: column values: {part!r} is not NAME=VALUE")
        try:
            out[name] = float(value)
        except ValueError:
            raise RecordError(f"{path}:{line}: column values: bad number in {part!r}") from None
    return out


STEP_COLUMNS = ("rank", "step", "start_s", "end_s", "compute_s", "comm_s", "samples", "strategy",
                "cluster_size")


def load_steps(path: Path) -> list[StepRow]:
    out = []
    for line, r in _read_csv(path, STEP_COLUMNS):
        f = lambda name, conv: _field(path, line, r, name, conv)  # noqa: E731
        batch = r.get("batch")
        exposed = r.get("exposed_comm_s")
        s = StepRow(rank=f("rank", int), step=f("step", int), start_s=f("start_s", float),
                    end_s=f("end_s", float), compute_s=f("compute_s", float),
                    comm_s=f("comm_s", float), samples=f("samples", int),
                    strategy=r["strategy"], cluster_size=f("cluster_size", int),
                    batch=f("batch", int) if batch not in (None, "") else None,
                    values=_values(path, line, r.get("values") or ""),
                    exposed_comm_s=f("exposed_comm_s", float) if exposed not in (None, "") else None)
        if s.end_s < s.start_s:
            raise RecordError(f"{path}:{line}: end_s before start_s")
        # Both are printed to the nanosecond from the same clock: exposed <= comm exactly.
        if exposed not in (None, "") and not 0 <= s.exposed_comm_s <= s.comm_s + 1e-9:
            raise RecordError(f"{path}:{line}: exposed_comm_s {s.exposed_comm_s} outside "
                              f"[0, comm_s {s.comm_s}]")
        out.append(s)
    return out


def load_collectives(path: Path) -> list[CollectiveRow]:
    cols = ("rank", "step", "name", "bytes", "start_s", "end_s", "strategy")
    out = []
    for line, r in _read_csv(path, cols):
        f = lambda name, conv: _field(path, line, r, name, conv)  # noqa: E731
        out.append(CollectiveRow(rank=f("rank", int), step=f("step", int), name=r["name"],
                                 bytes=f("bytes", int), start_s=f("start_s", float),
                                 end_s=f("end_s", float), strategy=r["strategy"]))
    return out


def load_events(path: Path) -> list[EventRow]:
    out = []
    for line, r in _read_csv(path, ("time_s", "kind", "phase", "label", "detail")):
        out.append(EventRow(time_s=_field(path, line, r, "time_s", float), kind=r["kind"],
                            phase=r["phase"], label=r["label"], detail=r["detail"]))
    return out


def load_json(path: Path) -> Any:
    if not path.is_file():
        raise RecordError(f"{path}: missing")
    try:
        with path.open() as f:
            return json.load(f)
    except json.JSONDecodeError as e:
        raise RecordError(f"{path}:{e.lineno}:{e.colno}: malformed JSON: {e.msg}") from e
    except (OSError, UnicodeDecodeError) as e:
        raise RecordError(f"{path}: {e}") from e


def load_summary(path: Path) -> dict[str, Any]:
    j = load_json(path)
    if not isinstance(j, dict):
        raise RecordError(f"{path}: expected a JSON object")
    return j


# ---------------------------------------------------------------------------------------------
# Runs


def _load_single(d: Path) -> tuple[list[StepRow], list[CollectiveRow], list[EventRow], dict]:
    steps = load_steps(d / "steps.csv")
    collectives = load_collectives(d / "collectives.csv") if (d / "collectives.csv").exists() else []
    events = load_events(d / "events.csv") if (d / "events.csv").exists() else []
    summary = load_summary(d / "summary.json") if (d / "summary.json").exists() else {}
    return steps, collectives, events, summary


def worker_dirs(d: Path) -> list[Path]:
    """kfrun worker directories (<ip>.<port>/ with a steps.csv) under d, in name order."""
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir()
                  if p.is_dir() and _WORKER_DIR.match(p.name) and (p / "steps.csv").exists())


def is_run_dir(d: Path) -> bool:
    return (d / "steps.csv").is_file() or bool(worker_dirs(d))


def load_run(d: Path | str, label: str | None = None) -> Run:
    """One run: a kfsim output directory or a kfrun output directory of worker subdirectories."""
    d = Path(d)
    if not d.is_dir():
        raise RecordError(f"{d}: no such directory")
    name = label or d.name
    if (d / "steps.csv").is_file():
        steps, collectives, events, summary = _load_single(d)
        return Run(d, name, steps, collectives, events, summary)
    workers = worker_dirs(d)
    if not workers:
        raise RecordError(f"{d}: no steps.csv, and no <ip>.<port>/ worker directories with one")
    return _merge_workers(d, name, workers)


def _merge_workers(d: Path, label: str, workers: list[Path]) -> Run:
    """Merges kftrain's per-worker records. Each host has its own steady clock: times are shifted
    so the host's first step starts at 0 (workers on one host keep their common clock)."""
    loaded = [(w, *_load_single(w)) for w in workers]
    hosts: dict[str, float] = {}
    for w, steps, *_ in loaded:
        host = w.name.rsplit(".", 1)[0]
        first = min((s.start_s for s in steps), default=math.inf)
        hosts[host] = min(hosts.get(host, math.inf), first)
    all_steps: list[StepRow] = []
    collectives: list[CollectiveRow] = []
    events: list[EventRow] = []
    seen_events: set[tuple] = set()
    summary: dict[str, Any] = {}
    summaries = []
    for w, steps, colls, evs, summ in loaded:
        host = w.name.rsplit(".", 1)[0]
        t0 = hosts[host] if math.isfinite(hosts[host]) else 0.0
        for s in steps:
            s.start_s -= t0
            s.end_s -= t0
            s.host = host
            all_steps.append(s)
        for c in colls:
            c.start_s -= t0
            c.end_s -= t0
            collectives.append(c)
        for e in evs:
            key = (e.kind, e.phase, e.label, e.detail)
            if key in seen_events:
                continue
            seen_events.add(key)
            e.time_s -= t0
            events.append(e)
        summaries.append(summ)
        if steps and steps[0].rank == 0:
            summary = dict(summ)
    if not summary and summaries:
        summary = dict(summaries[0])
    summary["workers_merged"] = len(workers)
    all_steps.sort(key=lambda s: (s.step, s.rank))
    events.sort(key=lambda e: e.time_s)
    run = Run(d, label, all_steps, collectives, events, summary, real=True)
    # The cluster's throughput (per-worker summaries each hold one worker's share).
    summary["throughput_samples_per_s"] = run.throughput()
    return run


# ---------------------------------------------------------------------------------------------
# Sweeps, variant directories and kfbench


@dataclass
class SweepRow:
    key: str
    value: str
    workers: int
    strategy: str
    throughput: float
    ideal: float
    efficiency: float
    median_step_s: float
    # With `seeds: N` > 1 the figures above are means over N seeds, and the throughput's 95%
    # confidence interval (Student's t) is given; None for a single seed.
    seeds: int = 1
    throughput_ci: tuple[float, float] | None = None


def load_sweep(path: Path | str) -> list[SweepRow]:
    """kfsim's sweep.csv (a file, or the directory holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / "sweep.csv"
    cols = ("key", "value", "workers", "strategy", "throughput_samples_per_s",
            "ideal_samples_per_s", "efficiency", "median_step_s")
    out = []
    for line, r in _read_csv(path, cols):
        f = lambda name, conv: _field(path, line, r, name, conv)  # noqa: E731
        ci = None
        if r.get("throughput_samples_per_s_ci95_low"):
            ci = (f("throughput_samples_per_s_ci95_low", float),
                  f("throughput_samples_per_s_ci95_high", float))
        out.append(SweepRow(key=r["key"], value=r["value"], workers=f("workers", int),
                            strategy=r["strategy"], throughput=f("throughput_samples_per_s", float),
                            ideal=f("ideal_samples_per_s", float), efficiency=f("efficiency", float),
                            median_step_s=f("median_step_s", float),
                            seeds=f("seeds", int) if r.get("seeds") else 1, throughput_ci=ci))
    if not out:
        raise RecordError(f"{path}: no rows")
    return out


def sub_runs(d: Path) -> list[Path]:
    """Run directories one level below d (a sweep's or a scenario's variants), in name order; an
    arm run at several seeds (kfsim's `seeds: N`) contributes its ARM/seed=S/ runs."""
    if not d.is_dir():
        return []
    out = []
    for p in sorted(q for q in d.iterdir() if q.is_dir() and not _WORKER_DIR.match(q.name)):
        if is_run_dir(p):
            out.append(p)
        else:
            out += sorted(q for q in p.iterdir() if q.is_dir() and q.name.startswith("seed=") and is_run_dir(q))
    return out


@dataclass
class BenchRow:
    bytes: int
    time_us: float
    algbw_gbps: float
    busbw_gbps: float


@dataclass
class Bench:
    path: Path
    label: str
    collective: str
    ranks: int
    strategy: str
    rows: list[BenchRow]


def load_kfbench(path: Path | str, label: str | None = None) -> list[Bench]:
    """kfbench --json output: one JSON object per line (kfrun's [ip.port::stdout] prefix allowed)."""
    path = Path(path)
    if not path.is_file():
        raise RecordError(f"{path}: missing")
    out = []
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise RecordError(f"{path}: {e}") from e
    for n, line in enumerate(lines, 1):
        brace = line.find("{")
        if brace < 0:
            continue
        try:
            j = json.loads(line[brace:])
        except json.JSONDecodeError as e:
            raise RecordError(f"{path}:{n}: malformed JSON: {e.msg}") from e
        if not isinstance(j, dict) or "rows" not in j:
            raise RecordError(f"{path}:{n}: not a kfbench --json object (no 'rows')")
        rows = []
        for i, r in enumerate(j["rows"]):
            try:
                rows.append(BenchRow(int(r["bytes"]), float(r["time_us"]), float(r["algbw_gbps"]),
                                     float(r["busbw_gbps"])))
            except (KeyError, TypeError, ValueError) as e:
                raise RecordError(f"{path}:{n}: row {i}: {e!r}") from None
        out.append(Bench(path, label or f"{j.get('collective', '?')} n={j.get('ranks', '?')} "
                         f"{j.get('strategy', '')}".strip(), str(j.get("collective", "")),
                         int(j.get("ranks", 0)), str(j.get("strategy", "")), rows))
    if not out:
        raise RecordError(f"{path}: no kfbench --json object found")
    return out
