#!/usr/bin/python3
"""Fig. 9: scalability of the collective layer, ideal vs actual throughput (ResNet-50, MobileNet-v2)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
from common import Figure, FigureError, load_sweep, main, ratio  # noqa: E402

from kfplot import style  # noqa: E402
from kfplot.records import SweepRow, load_run, sub_runs  # noqa: E402

MODELS = {"resnet50": "ResNet-50", "mobilenet_v2": "MobileNet-v2"}


def real_sweep(d: Path) -> list[SweepRow]:
    """A sweep from real records: one kfrun output directory per cluster size (n=2/, n=4/, ...).
    Ideal = every worker computing back to back: sum over workers of batch / median compute time."""
    rows = []
    for sub in sorted(sub_runs(d) or [p for p in d.iterdir() if p.is_dir()],
                      key=lambda p: int(p.name.split("=")[-1])):
        run = load_run(sub)
        steps = run.cluster_steps()[1:]
        n = max(s.workers for s in steps)
        per_rank: dict[int, list[float]] = {}
        for s in run.steps:
            if s.step > 0:
                per_rank.setdefault(s.rank, []).append(s.samples / s.compute_s if s.compute_s > 0 else 0.0)
        ideal = sum(sorted(v)[len(v) // 2] for v in per_rank.values())
        actual = run.throughput(steps)
        rows.append(SweepRow("workers", str(n), n, steps[0].strategy, actual, ideal,
                             actual / ideal if ideal else 0.0, 0.0))
    if not rows:
        raise FigureError(f"{d}: no n=N/ run directories")
    return rows


def body() -> int:
    f = Figure(9, "ideal vs actual throughput for 2..32 workers")
    sizes = [2, 4, 8, 16] if f.quick else [2, 4, 8, 16, 32]
    steps = 3 if f.quick else 4
    sweeps: dict[str, list[SweepRow]] = {}
    for model in MODELS:
        if f.mode == "real":
            if not f.args.records:
                raise FigureError("real mode needs --records DIR holding resnet50/n=N/ and mobilenet_v2/n=N/ "
                                  "(kfrun output of the commands in artifact/README.md, Fig. 9)")
            sweeps[model] = real_sweep(Path(f.args.records) / model)
            continue
        out = f.kfsim("scalability.yaml", model, [f"workload.model={model}", f"steps={steps}",
                                                  "sweep.values=[" + ",".join(map(str, sizes)) + "]"])
        sweeps[model] = load_sweep(out)

    fig, axes = style.plt.subplots(1, 2, figsize=(14, 5.6))
    for ax, (model, rows) in zip(axes, sweeps.items()):
        ws = [r.workers for r in rows]
        ax.plot(ws, [r.ideal for r in rows], ls="--", marker="x", color="gray", label="ideal (no communication)")
        ax.plot(ws, [r.throughput for r in rows], marker="o", color="tab:blue", label="actual (KungFu, BINARY_TREE_STAR)")
        for r in rows:
            ax.annotate(f"{100 * r.efficiency:.0f}%", (r.workers, r.throughput), textcoords="offset points",
                        xytext=(0, 8), ha="center", fontsize=11)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ws)
        ax.get_xaxis().set_major_formatter("{x:.0f}")
        ax.set_xlabel("workers (K80, one per VM, 10 Gbps)")
        ax.set_ylabel("throughput (images/s)")
        ax.set_ylim(bottom=0)
        ax.set_title(MODELS[model])
        ax.legend(loc="upper left", framealpha=0.9)
    fig.suptitle("Fig. 9: ideal vs actual training throughput (efficiency = actual / ideal)")
    f.save(fig)
    f.write_csv([{"model": m, "workers": r.workers, "actual_samples_per_s": r.throughput,
                  "ideal_samples_per_s": r.ideal, "efficiency": r.efficiency,
                  "per_worker_samples_per_s": r.throughput / r.workers}
                 for m, rows in sweeps.items() for r in rows])

    parts = []
    for model, rows in sweeps.items():
        name = MODELS[model]
        first, last = rows[0], rows[-1]
        f.check(all(r.throughput <= 1.02 * r.ideal for r in rows), f"{name}: actual <= ideal at every size",
                value=max(ratio(r.throughput, r.ideal) for r in rows),
                name=f"{name}: actual <= ideal at every size (highest actual / ideal)")
        f.check(all(b.throughput > a.throughput for a, b in zip(rows, rows[1:])),
                f"{name}: actual throughput grows with every doubling "
                f"({' -> '.join(f'{r.throughput:.0f}' for r in rows)} images/s)",
                value=min((ratio(b.throughput, a.throughput) for a, b in zip(rows, rows[1:])), default=None),
                name=f"{name}: actual throughput grows with every doubling (smallest gain per doubling)")
        f.check(first.efficiency >= 0.7, f"{name}: near-ideal at {first.workers} workers "
                f"({100 * first.efficiency:.0f}% >= 70%)", value=first.efficiency,
                name=f"{name}: near-ideal at {first.workers} workers (efficiency >= 70%)")
        f.check(last.efficiency < first.efficiency, f"{name}: the gap to ideal widens with scale "
                f"({100 * first.efficiency:.0f}% at {first.workers} -> {100 * last.efficiency:.0f}% at {last.workers})",
                value=first.efficiency - last.efficiency,
                name=f"{name}: the gap to ideal widens with scale (efficiency lost from {first.workers} to "
                f"{last.workers} workers)")
        parts.append(f"{name}: {first.throughput / first.workers:.1f} images/s per worker at {first.workers} "
                     f"workers ({100 * first.efficiency:.0f}% of ideal), "
                     f"{last.throughput:.0f} images/s at {last.workers} workers against {last.ideal:.0f} ideal "
                     f"({100 * last.efficiency:.0f}%)")
    cfg = (f"scenarios/scalability.yaml swept over topology.hosts = {', '.join(map(str, sizes))}: one K80 "
           "worker per host on a 10 Gbps star (20 us, 64 KB segments), batch 32 per worker, S-SGD over "
           f"KungFu's default BINARY_TREE_STAR, {steps} steps per size, once with workload.model = resnet50 "
           "(25.6M parameters) and once with mobilenet_v2 (3.5M); ideal = workers x profiled compute rate.")
    if f.mode == "real":
        cfg = f"records of real runs from {f.args.records} (see artifact/README.md); ideal from measured compute times."
    return f.finish("Adding workers raises KungFu's throughput close to the ideal (no communication) line: "
                    "about 50 images/s per K80 at 2 VMs, with the gap to ideal growing with the cluster.",
                    cfg, "; ".join(parts) + ".")


if __name__ == "__main__":
    main(body)
