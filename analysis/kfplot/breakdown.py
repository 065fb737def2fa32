"""A step's time as compute and communication (steps.csv: compute_s, comm_s, exposed_comm_s):
the compute alone, the communication the backward pass hid (comm_s - exposed_comm_s, drawn inside
the compute it overlapped) and the communication it left exposed after the compute. A bar's height
is compute_s + exposed_comm_s, the step's length on a worker. Without overlap (workload.bucketing
none) exposed_comm_s is comm_s and nothing is hidden."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from .records import Run
from .style import figure, save


@dataclass
class Breakdown:
    """Seconds of one step (or of a run's mean step), averaged over the step's workers."""

    step: int
    compute_s: float  # forward and backward
    overlapped_s: float  # communication while computing: comm_s - exposed_comm_s
    exposed_s: float  # communication after the compute: exposed_comm_s

    @property
    def compute_only_s(self) -> float:
        return self.compute_s - self.overlapped_s

    @property
    def total_s(self) -> float:
        return self.compute_s + self.exposed_s


def step_breakdown(run: Run) -> list[Breakdown]:
    """Per step, in step order: the mean over the workers that ran it."""
    by_step: dict[int, list] = {}
    for s in run.steps:
        by_step.setdefault(s.step, []).append(s)
    out = []
    for step in sorted(by_step):
        rows = by_step[step]
        n = len(rows)
        out.append(Breakdown(step=step,
                             compute_s=sum(r.compute_s for r in rows) / n,
                             overlapped_s=sum(r.comm_s - r.exposed_comm_s for r in rows) / n,
                             exposed_s=sum(r.exposed_comm_s for r in rows) / n))
    return out


def mean_breakdown(run: Run, skip: int = 0) -> Breakdown:
    """The mean step of `run` from step index `skip` (0: every step); step -1 marks a mean."""
    steps = step_breakdown(run)[skip:] or step_breakdown(run)
    n = max(1, len(steps))
    return Breakdown(step=-1, compute_s=sum(b.compute_s for b in steps) / n,
                     overlapped_s=sum(b.overlapped_s for b in steps) / n,
                     exposed_s=sum(b.exposed_s for b in steps) / n)


SEGMENTS = (  # (attribute, label, colour, hatch)
    ("compute_only_s", "compute, nothing on the network", "tab:blue", ""),
    ("overlapped_s", "compute with communication hidden under it", "tab:cyan", "//"),
    ("exposed_s", "exposed communication", "tab:red", ""),
)


def _bars(ax, xs: Sequence[float], rows: Sequence[Breakdown], width: float) -> None:
    bottom = [0.0] * len(rows)
    for attr, label, colour, hatch in SEGMENTS:
        heights = [getattr(b, attr) for b in rows]
        ax.bar(xs, heights, width, bottom=bottom, color=colour, hatch=hatch, edgecolor="white",
               linewidth=0.3, label=label)
        bottom = [b + h for b, h in zip(bottom, heights)]


def breakdown(run: Run, base: Path | str, title: str | None = None) -> list[Path]:
    """Stacked bars per step of `run`: compute alone, compute with hidden communication, exposed
    communication (means over the step's workers)."""
    rows = step_breakdown(run)
    mean = mean_breakdown(run)
    fig, ax = figure()
    _bars(ax, [float(b.step) for b in rows], rows, 0.8)
    ax.set_xlabel("training step")
    ax.set_ylabel("time per step (s), mean over workers")
    ax.set_ylim(0, 1.4 * max((b.total_s for b in rows), default=1.0) or 1.0)  # room for the legend
    comm = mean.overlapped_s + mean.exposed_s
    hidden = mean.overlapped_s / comm if comm > 0 else 0.0
    ax.set_title(title or (f"{run.label}: compute {mean.compute_s:.3g} s, communication "
                           f"{comm:.3g} s per step, {hidden:.0%} hidden"))
    ax.legend(loc="upper left", framealpha=0.85)
    return save(fig, base)


def breakdown_compare(runs: Sequence[Run], base: Path | str, title: str | None = None) -> list[Path]:
    """One stacked bar per run: its mean step (every step but the first, which opens the
    connections, when there are more)."""
    rows = [mean_breakdown(r, skip=1) for r in runs]
    fig, ax = figure()
    xs = [float(i) for i in range(len(runs))]
    _bars(ax, xs, rows, 0.6)
    ax.set_xticks(xs)
    tilt = len(runs) > 4
    ax.set_xticklabels([r.label for r in runs], rotation=20 if tilt else 0,
                       ha="right" if tilt else "center")
    ax.set_ylabel("mean time per step (s)")
    ax.set_ylim(0, 1.4 * max((b.total_s for b in rows), default=1.0) or 1.0)  # room for the legend
    ax.set_title(title or "a step's compute and communication, per run")
    ax.legend(loc="upper left", framealpha=0.85)
    return save(fig, base)
