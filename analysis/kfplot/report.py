"""Every plot that applies to a set of output directories: what analysis/plot.py runs."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from . import accuracy as acc
from . import breakdown as bd
from . import busbw as bw
from . import scaling as sc
from . import tcp
from . import timeline as tl
from .records import (Bench, RecordError, Run, is_run_dir, load_kfbench, load_run, load_sweep,
                      sub_runs)


def plot_run(run: Run, out: Path) -> list[Path]:
    """Throughput timeline, cluster size, each step's compute and communication, accuracy
    (numeric workloads), busbw (when collectives), the TCP senders (when the world sampled them:
    tcp.csv)."""
    written = tl.throughput_timeline([run], out / "throughput")
    written += tl.cluster_size([run], out / "cluster_size")
    written += bd.breakdown(run, out / "step_breakdown")
    if acc.has_value(run):
        target = run.summary.get("target_accuracy") or None
        written += acc.accuracy([run], out / "accuracy", target=target)
    if bw.run_busbw(run):
        written += bw.busbw([run], base=out / "busbw")
    if (run.path / "tcp.csv").is_file():
        rows = tcp.load_tcp(run.path / "tcp.csv")
        if rows:
            written += tcp.tcp_timeline(run, rows, out / "tcp")
    return written


def plot_group(runs: Sequence[Run], out: Path, prefix: str = "") -> list[Path]:
    """Several runs overlaid with a legend, their mean steps' compute and communication side by
    side; where two or more sampled their TCP senders, their windows and round trips on one
    figure."""
    written = tl.throughput_timeline(runs, out / f"{prefix}throughput")
    written += bd.breakdown_compare(runs, out / f"{prefix}step_breakdown")
    if len({s.cluster_size for r in runs for s in r.steps}) > 1:
        written += tl.cluster_size(runs, out / f"{prefix}cluster_size")
    with_acc = [r for r in runs if acc.has_value(r)]
    if with_acc:
        written += acc.accuracy(with_acc, out / f"{prefix}accuracy")
    sampled = [(r, tcp.load_tcp(r.path / "tcp.csv")) for r in runs
               if (r.path / "tcp.csv").is_file()]
    sampled = [(r, rows) for r, rows in sampled if rows]
    if len(sampled) > 1:
        written += tcp.tcp_overlay(sampled[:len(tcp.RUN_STYLES)], out / f"{prefix}tcp")
    return written


def plot_paths(paths: Sequence[Path | str], out: Path | str | None = None,
               labels: Sequence[str] | None = None) -> list[Path]:
    """Plots each path next to its records; with several runs, also overlays them into `out`
    (default: the first directory, files prefixed compare_)."""
    written: list[Path] = []
    runs: list[Run] = []
    benches: list[Bench] = []
    sweeps = []
    labels = list(labels or [])
    for i, p in enumerate(map(Path, paths)):
        label = labels[i] if i < len(labels) else None
        if p.is_file():
            benches += load_kfbench(p, label)
            continue
        if not p.is_dir():
            raise RecordError(f"{p}: no such file or directory")
        if (p / "sweep.csv").is_file():
            rows = load_sweep(p)
            sweeps.append((label or p.name, rows))
            written += sc.scaling([(label or p.name, rows)], p / "scaling",
                                  title=f"{p.name}: actual vs ideal throughput")
            arms = sub_runs(p)
            if arms:  # the runs beside sweep.csv (KEY=VALUE/): each value's mean step, in its order
                order = {f"{r.key}={r.value}": i for i, r in enumerate(rows)}
                arms.sort(key=lambda s: order.get(s.name if s.parent == p else s.parent.name, len(order)))
                names = {f"{r.key}={r.value}": r.value for r in rows}
                written += bd.breakdown_compare(
                    [load_run(s, names.get(s.name, s.name) if s.parent == p
                              else f"{names.get(s.parent.name, s.parent.name)}/{s.name}")
                     for s in arms], p / "step_breakdown",
                    title=f"{p.name}: a step's compute and communication per {rows[0].key}")
            continue
        if is_run_dir(p):
            run = load_run(p, label)
            runs.append(run)
            written += plot_run(run, p)
            continue
        subs = sub_runs(p)
        if not subs:
            raise RecordError(f"{p}: no records here (steps.csv, sweep.csv, <ip>.<port>/ worker "
                              "directories or run subdirectories)")
        # ARM/seed=S/ runs are labelled by both names.
        group = [load_run(s, None if s.parent == p else f"{s.parent.name}/{s.name}") for s in subs]
        written += plot_group(group, p)
        runs += group
    if benches:
        target = Path(out) if out else benches[0].path.parent
        written += bw.busbw(runs=[], benches=benches, base=target / "kfbench_busbw")
    if len(runs) > 1 and len(paths) > 1:
        target = Path(out) if out else Path(paths[0])
        written += plot_group(runs, target, prefix="compare_")
    if len(sweeps) > 1:
        target = Path(out) if out else Path(paths[0])
        written += sc.scaling(sweeps, target / "compare_scaling")
    return written
