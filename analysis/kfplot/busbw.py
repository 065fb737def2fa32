"""Allreduce bus bandwidth against message size, from a run's collectives.csv or kfbench --json.

busbw follows nccl-tests: algbw = bytes / time, busbw = algbw x 2(n-1)/n for allreduce (GB = 1e9).
For a run, one collective's time is its span over all ranks (first start to last end).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from statistics import median
from typing import Sequence

from .records import Bench, Run
from .style import figure, save
from .timeline import colours


def run_busbw(run: Run) -> list[tuple[int, float]]:
    """(bytes, busbw GB/s) of every collective of the run (rank 0's view of size)."""
    groups: dict[tuple[int, str], list] = defaultdict(list)
    for c in run.collectives:
        groups[(c.step, c.name)].append(c)
    out = []
    for rows in groups.values():
        n = len(rows)
        span = max(r.end_s for r in rows) - min(r.start_s for r in rows)
        if n < 2 or span <= 0:
            continue
        size = rows[0].bytes
        out.append((size, size / span * 2 * (n - 1) / n / 1e9))
    return out


def _binned(points: Sequence[tuple[int, float]]) -> tuple[list[float], list[float]]:
    """Median size and median busbw per power-of-two size bin."""
    bins: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for size, bw in points:
        bins[max(0, int(size).bit_length() - 1)].append((size, bw))
    keys = sorted(bins)
    return ([float(median(p[0] for p in bins[k])) for k in keys],
            [median(p[1] for p in bins[k]) for k in keys])


def busbw(runs: Sequence[Run] = (), benches: Sequence[Bench] = (), base: Path | str = "busbw",
          title: str | None = None) -> list[Path]:
    fig, ax = figure()
    cs = colours(len(runs) + len(benches))
    for run, c in zip(runs, cs):
        pts = run_busbw(run)
        if not pts:
            continue
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=8, alpha=0.25, color=c)
        xs, ys = _binned(pts)
        ax.plot(xs, ys, marker="o", color=c, label=f"{run.label} (median per size)")
    for bench, c in zip(benches, cs[len(runs):]):
        ax.plot([r.bytes for r in bench.rows], [r.busbw_gbps for r in bench.rows], marker="s",
                color=c, label=f"{bench.label} (kfbench)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("allreduce bus bandwidth (GB/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "allreduce bus bandwidth vs size")
    ax.legend(loc="upper left", framealpha=0.85)
    return save(fig, base)
