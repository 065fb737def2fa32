"""Scaling curves: actual against ideal throughput over a sweep (workers, strategies, ...)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .records import SweepRow
from .style import figure, save
from .timeline import colours


def _numeric(rows: Sequence[SweepRow]) -> bool:
    try:
        [float(r.value) for r in rows]
        return True
    except ValueError:
        return False


def scaling(sweeps: Sequence[tuple[str, Sequence[SweepRow]]], base: Path | str,
            title: str | None = None, x_label: str | None = None,
            y_label: str = "throughput (samples/s)") -> list[Path]:
    """One actual (solid) and one ideal (dashed) curve per labelled sweep; bars for a categorical
    sweep (e.g. strategies)."""
    fig, ax = figure()
    if all(_numeric(rows) for _, rows in sweeps):
        for (label, rows), c in zip(sweeps, colours(len(sweeps))):
            by_workers = sweeps_key_is_workers(rows)
            xs = [r.workers if by_workers else float(r.value) for r in rows]
            ax.plot(xs, [r.throughput for r in rows], marker="o", color=c, label=f"{label}: actual")
            if any(r.throughput_ci for r in rows):  # means over seeds: their 95% interval as a band
                ax.fill_between(xs, [r.throughput_ci[0] if r.throughput_ci else r.throughput for r in rows],
                                [r.throughput_ci[1] if r.throughput_ci else r.throughput for r in rows],
                                color=c, alpha=0.2, lw=0, label=f"{label}: 95% interval ({rows[0].seeds} seeds)")
            ax.plot(xs, [r.ideal for r in rows], ls="--", marker="x", color=c, alpha=0.7,
                    label=f"{label}: ideal (no communication)")
            for x, r in zip(xs, rows):
                ax.annotate(f"{100 * r.efficiency:.0f}%", (x, r.throughput), textcoords="offset points",
                            xytext=(0, -16), ha="center", fontsize=10, color=c)
        first = sweeps[0][1]
        if sweeps_key_is_workers(first):
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({r.workers for _, rows in sweeps for r in rows}))
            ax.get_xaxis().set_major_formatter("{x:.0f}")
        ax.set_xlabel(x_label or ("workers" if sweeps_key_is_workers(first) else first[0].key))
        ax.set_ylim(bottom=0)
    else:
        n = len(sweeps)
        width = 0.8 / n
        values = list(dict.fromkeys(r.value for _, rows in sweeps for r in rows))
        for i, ((label, rows), c) in enumerate(zip(sweeps, colours(n))):
            by = {r.value: r for r in rows}
            xs = [j + (i - (n - 1) / 2) * width for j, v in enumerate(values) if v in by]
            shown = [by[v] for v in values if v in by]
            # Means over seeds: their 95% interval as error bars.
            err = None
            if any(r.throughput_ci for r in shown):
                err = [[r.throughput - r.throughput_ci[0] if r.throughput_ci else 0 for r in shown],
                       [r.throughput_ci[1] - r.throughput if r.throughput_ci else 0 for r in shown]]
            ax.bar(xs, [r.throughput for r in shown], width, color=c, yerr=err, capsize=3,
                   label=f"{label}: actual" + (f" (mean, 95% interval, {shown[0].seeds} seeds)" if err else ""))
            ax.scatter(xs, [by[v].ideal for v in values if v in by], marker="_", s=300, color="black",
                       label="ideal (no communication)" if i == 0 else None)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(values, rotation=30, ha="right")
        ax.set_xlabel(x_label or sweeps[0][1][0].key)
    ax.set_ylabel(y_label)
    ax.set_title(title or "actual vs ideal throughput")
    ax.legend(loc="upper left", framealpha=0.85)
    return save(fig, base)


def sweeps_key_is_workers(rows: Sequence[SweepRow]) -> bool:
    """True when the sweep changes the number of workers (topology.hosts, ...)."""
    return len({r.workers for r in rows}) == len(rows) and len(rows) > 1
