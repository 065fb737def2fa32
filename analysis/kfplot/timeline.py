"""Per-step throughput over time (event windows shaded, adaptations marked) and cluster size."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .records import Run, Window
from .style import ADAPT_STYLE, WINDOW_COLOURS, figure, save


def _x(run: Run, by: str) -> list[float]:
    return [float(c.step) if by == "step" else c.end_s for c in run.cluster_steps()]


def _time_to_step(run: Run, t: float) -> float:
    """Event time -> the step (fractional) in progress then, for plots against steps."""
    for c in run.cluster_steps():
        if t <= c.end_s:
            span = c.duration_s
            return c.step + (0.0 if span <= 0 else max(0.0, min(1.0, (t - c.start_s) / span)))
    steps = run.cluster_steps()
    return float(steps[-1].step + 1) if steps else 0.0


def shade_events(ax, runs: Sequence[Run], by: str) -> None:
    seen: set[tuple] = set()
    for run in runs:
        for w in run.windows():
            start = w.start_s if by == "time" else _time_to_step(run, w.start_s)
            stop_t = w.stop_s if w.stop_s is not None else run.end_s
            stop = stop_t if by == "time" else _time_to_step(run, stop_t)
            key = (w.kind, w.label, round(start, 3), round(stop, 3))
            if key in seen:
                continue
            seen.add(key)
            colour = WINDOW_COLOURS.get(w.kind, "tab:gray")
            label = f"{w.kind} ({w.label})" if len(runs) == 1 else w.kind
            if stop > start:
                ax.axvspan(start, stop, color=colour, alpha=0.12, label=label)
            else:
                ax.axvline(start, color=colour, lw=2.5, alpha=0.6, label=label)


def _mark_adaptations(ax, runs: Sequence[Run], by: str, colours: Sequence[str]) -> None:
    labelled: set[str] = set()
    for run, colour in zip(runs, colours):
        for e in run.adaptations():
            x = e.time_s if by == "time" else _time_to_step(run, e.time_s)
            c, ls = ADAPT_STYLE.get(e.kind, ("tab:gray", ":"))
            label = None if e.kind in labelled else f"{e.kind}"
            labelled.add(e.kind)
            ax.axvline(x, color=c if len(runs) == 1 else colour, ls=ls, lw=1.5, alpha=0.8,
                       label=label)
            if len(runs) == 1:
                ax.annotate(e.detail, (x, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                            va="top", ha="right", fontsize=9, color=c)


def colours(n: int) -> list[str]:
    base = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
            "tab:pink", "tab:olive", "tab:cyan", "tab:gray"]
    return [base[i % len(base)] for i in range(n)]


def throughput_timeline(runs: Sequence[Run], base: Path | str, by: str = "time",
                        title: str | None = None) -> list[Path]:
    """Cluster throughput (samples/s) per step against time (s) or step number."""
    fig, ax = figure()
    cs = colours(len(runs))
    for run, c in zip(runs, cs):
        steps = run.cluster_steps()
        ax.plot(_x(run, by), [s.throughput for s in steps], marker="o", ms=3.5, color=c,
                label=f"{run.label} ({run.throughput():.1f} samples/s overall)")
    shade_events(ax, runs, by)
    _mark_adaptations(ax, runs, by, cs)
    ax.set_xlabel("simulated / wall time (s)" if by == "time" else "training step")
    ax.set_ylabel("cluster throughput (samples/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or ("throughput per step: " + ", ".join(r.label for r in runs)))
    ax.legend(loc="lower left", framealpha=0.85)
    return save(fig, base)


def cluster_size(runs: Sequence[Run], base: Path | str, title: str | None = None) -> list[Path]:
    """Workers in the cluster over time, resizes marked."""
    fig, ax = figure()
    cs = colours(len(runs))
    top = 1
    for run, c in zip(runs, cs):
        steps = run.cluster_steps()
        xs, ys = [], []
        for s in steps:
            xs += [s.start_s, s.end_s]
            ys += [s.cluster_size, s.cluster_size]
            top = max(top, s.cluster_size)
        ax.plot(xs, ys, color=c, label=run.label, drawstyle="steps-post")
    shade_events(ax, runs, "time")
    _mark_adaptations(ax, [r for r in runs], "time", cs)
    ax.set_xlabel("simulated / wall time (s)")
    ax.set_ylabel("cluster size (workers)")
    ax.set_ylim(0, top + 1)
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title or "cluster size over time")
    ax.legend(loc="lower right", framealpha=0.85)
    return save(fig, base)


def windows_of(run: Run) -> list[Window]:
    return run.windows()
