#!/usr/bin/python3
"""Fig. 4: adaptive batch size (gradient noise scale) vs fixed small and fixed large batches.

Runs scenarios/adaptive-batch.yaml (--model mlp, the default) or, with --model torch,
scenarios/adaptive-batch-fashion.yaml (a PyTorch CNN on Fashion-MNIST inside kfsim), whose arms
(variants) write one run directory each under the output directory: fixed small, fixed large and
adaptive batch. The claim: the adaptive arm reaches
the target accuracy sooner (in simulated training time) than either fixed batch size.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
from common import NOT_AVAILABLE, ROOT, Figure, FigureError, main, ratio  # noqa: E402

from kfplot import style  # noqa: E402
from kfplot.records import load_json, load_run, sub_runs  # noqa: E402
from kfplot.timeline import colours  # noqa: E402

# By --model: the MLP on a Gaussian mixture (C++ numeric model), or the user's PyTorch CNN on the
# real Fashion-MNIST (workload.torch, examples/fashion_cnn.py).
SCENARIOS = {"mlp": ROOT / "scenarios" / "adaptive-batch.yaml",
             "torch": ROOT / "scenarios" / "adaptive-batch-fashion.yaml"}


def model_option(ap) -> None:
    ap.add_argument("--model", choices=sorted(SCENARIOS), default="mlp",
                    help="mlp (the shipped numeric model; the default) or torch (a PyTorch CNN on "
                    "Fashion-MNIST, inside kfsim; needs kfsim built with KF_WITH_TORCH and "
                    "dataset-fashion-mnist)")


def body() -> int:
    f = Figure(4, "adaptive batch size vs fixed small and large batches", options=model_option)
    scenario = SCENARIOS[f.args.model]
    if f.mode == "real" and f.args.records:
        out = Path(f.args.records)
    else:
        if not scenario.is_file():
            print(f"fig4: not available yet: {scenario.relative_to(ROOT)} does not exist (the adaptive "
                  "batch-size scenario: fixed small / fixed large / adaptive arms)", file=sys.stderr)
            return NOT_AVAILABLE
        if f.mode == "real":
            raise FigureError("real mode needs --records DIR holding one kfrun output directory per arm "
                              "(see artifact/README.md, Fig. 4)")
        # The scenarios are sized to run in minutes; --quick runs them as they are.
        out = f.kfsim(str(scenario.relative_to(ROOT)), scenario.stem)
    arms = sub_runs(out)
    if len(arms) < 2:
        raise FigureError(f"{out}: expected one run directory per arm (fixed small, fixed large, adaptive)")
    runs = [load_run(a) for a in arms]
    combined = load_json(out / "summary.json") if (out / "summary.json").is_file() else {}

    def time_to_target(run) -> float:
        t = run.summary.get("time_to_target")
        return float(t["time_s"]) if isinstance(t, dict) and "time_s" in t else math.inf

    target = next((r.summary.get("target_accuracy") for r in runs if r.summary.get("target_accuracy")), None)
    fig, (ax, bx) = style.plt.subplots(1, 2, figsize=(14, 5.6))
    for run, c in zip(runs, colours(len(runs))):
        pts = run.values("accuracy")
        t = time_to_target(run)
        ax.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", ms=3, color=c,
                label=f"{run.label}" + (f" (target at {t:.0f} s)" if math.isfinite(t) else " (target not reached)"))
        cs = run.cluster_steps()
        bx.plot([s.end_s for s in cs], [(s.batch or 0) * s.workers for s in cs], color=c, label=run.label,
                drawstyle="steps-post")
    if target:
        ax.axhline(float(target), color="black", ls=":", lw=1.5, label=f"target {float(target):g}")
    ax.set_xlabel("simulated training time (s)")
    ax.set_ylabel("test accuracy")
    ax.set_title("accuracy over time")
    ax.legend(loc="lower right", framealpha=0.9)
    bx.set_xlabel("simulated training time (s)")
    bx.set_ylabel("global batch size (samples)")
    bx.set_yscale("log", base=2)
    bx.set_title("batch size over time")
    bx.legend(loc="upper left", framealpha=0.9)
    fig.suptitle("Fig. 4: adaptive batch size (gradient noise scale) vs fixed batch sizes"
                 + (" (PyTorch CNN, Fashion-MNIST)" if f.args.model == "torch" else ""))
    f.save(fig)
    f.write_csv([{"arm": r.label, "time_to_target_s": time_to_target(r),
                  "final_accuracy": r.summary.get("final_accuracy"), "steps": len(r.cluster_steps()),
                  "samples_per_s": r.throughput()} for r in runs])

    adaptive = [r for r in runs if "adaptive" in r.label.lower()]
    fixed = [r for r in runs if r not in adaptive]
    if not adaptive or not fixed:
        raise FigureError(f"{out}: cannot tell the adaptive arm from the fixed ones by name "
                          f"({', '.join(r.label for r in runs)})")
    a = adaptive[0]
    ta = time_to_target(a)
    f.check(math.isfinite(ta), f"the adaptive arm reaches the target ({ta:.1f} s)", value=ta,
            name="the adaptive arm reaches the target (its time to target, s)")
    for r in fixed:
        tr = time_to_target(r)
        f.check(ta < tr, f"adaptive reaches it sooner than {r.label} ({ta:.1f} s vs "
                f"{'never' if math.isinf(tr) else f'{tr:.1f} s'})", value=ratio(tr, ta),
                name=f"adaptive reaches it sooner than {r.label} (speed-up: its time / adaptive's)")
    cfg = f"{scenario.relative_to(ROOT)} ({', '.join(r.label for r in runs)}), target accuracy {target}."
    if combined:
        cfg += " Combined summary: " + str({k: v for k, v in combined.items() if not isinstance(v, (dict, list))})
    res = "; ".join(
        f"{r.label}: target at {time_to_target(r):.1f} s" if math.isfinite(time_to_target(r))
        else f"{r.label}: target not reached (final accuracy {r.summary.get('final_accuracy')})" for r in runs) + "."
    return f.finish("Adapting the batch size to the gradient noise scale reaches the target accuracy sooner "
                    "than either fixed batch size (ResNet-56 on CIFAR-10, 4 x 32 and 4 x 1024)"
                    + (" -- here a PyTorch CNN on Fashion-MNIST trained inside kfsim." if f.args.model == "torch"
                       else "."), cfg, res)


if __name__ == "__main__":
    main(body)
