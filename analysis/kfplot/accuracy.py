"""Test accuracy (or any monitored value) against time, several runs overlaid."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .records import Run
from .style import figure, save
from .timeline import colours


def has_value(run: Run, name: str = "accuracy") -> bool:
    return any(name in s.values for s in run.steps)


def accuracy(runs: Sequence[Run], base: Path | str, name: str = "accuracy",
             target: float | None = None, title: str | None = None) -> list[Path]:
    fig, ax = figure()
    for run, c in zip(runs, colours(len(runs))):
        pts = run.values(name)
        ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", ms=3, color=c, label=run.label)
    if target:
        ax.axhline(target, color="black", ls=":", lw=1.5, label=f"target {target:g}")
    ax.set_xlabel("simulated / wall time (s)")
    ax.set_ylabel("test accuracy" if name == "accuracy" else name)
    ax.set_title(title or f"{name} over time")
    ax.legend(loc="lower right", framealpha=0.85)
    return save(fig, base)
