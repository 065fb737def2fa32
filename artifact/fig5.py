#!/usr/bin/python3
"""Fig. 5: adaptive communication strategy under network contention (static vs adaptive)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "lib"))
from common import Figure, FigureError, load_run, main, ratio  # noqa: E402

from kfplot import style  # noqa: E402
from kfplot.records import Window  # noqa: E402
from kfplot.timeline import _time_to_step  # noqa: E402

CONTENTION_STEP = 30  # real mode: the step at which iperf3 is started on worker 0's VM


def body() -> int:
    f = Figure(5, "adaptive communication strategy under network contention")
    if f.mode == "real":
        if not f.args.records:
            raise FigureError("real mode needs --records DIR holding adaptive/ and static/ (kfrun "
                              "output of the commands in artifact/README.md, Fig. 5)")
        adaptive_dir, static_dir = Path(f.args.records) / "adaptive", Path(f.args.records) / "static"
    else:
        sets = ["steps=40"] if f.quick else []
        adaptive_dir = f.kfsim("contention.yaml", "adaptive", sets)
        static_dir = f.kfsim("contention-static.yaml", "static", sets)
    adaptive = load_run(adaptive_dir, "adaptive (adaptive_strategy)")
    static = load_run(static_dir, "static (STAR throughout)")

    # Before / during from the records: the contention window, and the steps after the switch.
    def window(run):
        """The contention window from events.csv; a real run's background traffic is started by hand
        at step CONTENTION_STEP (artifact/README.md), so its window starts with that step."""
        ws = [w for w in run.windows() if w.kind == "contention"]
        if ws:
            return ws[0]
        if f.mode == "real":
            first = next((s for s in run.cluster_steps() if s.step >= CONTENTION_STEP), None)
            if first is not None:
                return Window("contention", f"from step {CONTENTION_STEP}", first.start_s, None)
        raise FigureError(f"{run.path}: no contention event in events.csv")

    def split(run):
        w = window(run)
        steps = run.cluster_steps()
        before = [s for s in steps if s.end_s <= w.start_s and s.step > 0]
        during = [s for s in steps if s.end_s > w.start_s and (w.stop_s is None or s.start_s < w.stop_s)]
        return before, during

    a_before, a_during = split(adaptive)
    s_before, s_during = split(static)
    switches = [e for e in adaptive.adaptations() if e.kind == "switch"]
    if not a_before or not s_before or not a_during or not s_during:
        raise FigureError("too few steps before or during the contention")
    a_b, s_b = adaptive.throughput(a_before), static.throughput(s_before)
    s_d = static.throughput(s_during)
    if switches:
        sw = switches[0]
        switch_step = int(sw.label.split()[-1]) if sw.label.startswith("step ") else None
        recovered = [s for s in a_during if switch_step is not None and s.step > switch_step]
        a_rec = adaptive.throughput(recovered) if recovered else 0.0
    else:
        sw, switch_step, recovered, a_rec = None, None, [], 0.0
    first_contended = a_during[0].step

    # The figure: throughput per step of both runs, contention shaded, the switch marked.
    fig, ax = style.figure()
    for run, c in ((static, "tab:red"), (adaptive, "tab:blue")):
        cs = run.cluster_steps()
        ax.plot([s.step for s in cs], [s.throughput for s in cs], marker="o", ms=4, color=c, label=run.label)
    w = window(adaptive)
    ax.axvspan(first_contended - 0.5,
               _time_to_step(adaptive, w.stop_s) if w.stop_s else adaptive.cluster_steps()[-1].step + 0.5,
               color="tab:red", alpha=0.1, label="background traffic on worker 0's link")
    if sw is not None:
        ax.axvline(switch_step - 0.5, color="tab:green", ls="--", label=f"switch: {sw.detail}")
    ax.axhline(0.9 * a_b, color="gray", ls=":", lw=1.5, label="90% of adaptive's throughput before")
    ax.set_xlabel("training step")
    ax.set_ylabel("cluster throughput (samples/s)")
    ax.set_ylim(bottom=0)
    ax.set_title("Fig. 5: STAR under contention, static vs adaptive strategy")
    ax.legend(loc="lower left", framealpha=0.9)
    f.save(fig)

    rows = []
    by_step_s = {s.step: s for s in static.cluster_steps()}
    for s in adaptive.cluster_steps():
        t = by_step_s.get(s.step)
        rows.append({"step": s.step, "adaptive_samples_per_s": s.throughput, "adaptive_strategy": s.strategy,
                     "static_samples_per_s": t.throughput if t else "", "static_strategy": t.strategy if t else ""})
    f.write_csv(rows)

    f.check(sw is not None and switch_step - first_contended <= 5,
            "adaptive never switched strategy" if sw is None else
            f"adaptive switched {switch_step - first_contended} step(s) after the contention began (<= 5)",
            value=None if sw is None else switch_step - first_contended,
            name="adaptive switched strategy within 5 steps of the contention (steps after it began)")
    f.check(a_rec >= 0.9 * a_b, f"adaptive recovered {a_rec / a_b:.3f} of its throughput before (>= 0.9)",
            value=ratio(a_rec, a_b), name="adaptive recovered >= 0.9 of its throughput before (fraction recovered)")
    f.check(s_d < 0.9 * s_b, f"static kept {s_d / s_b:.3f} of its throughput before (< 0.9: it does not recover)",
            value=ratio(s_d, s_b), name="static kept < 0.9 of its throughput before (fraction kept)")
    cfg = ("4 workers (K80 profile, ResNet-50, batch 32 each) on a 1 Gbps star, S-SGD over STAR rooted at "
           "worker 0; from step 30 two bulk TCP flows leave worker 0's host; adaptive runs "
           "`adaptive_strategy` (threshold 0.8, window 3, alternative star), static runs no policy "
           f"({len(adaptive.cluster_steps())} steps each; scenarios/contention.yaml, contention-static.yaml).")
    if f.mode == "real":
        cfg = f"records of a real run from {f.args.records} (see artifact/README.md)."
    res = (f"Before the contention both run at {a_b:.1f} / {s_b:.1f} samples/s. The static run drops to "
           f"{s_d:.1f} samples/s ({100 * s_d / s_b:.0f}%) and stays there; the adaptive run votes, agrees and "
           + (f"switches ({sw.detail}) before step {switch_step}, {switch_step - first_contended} step(s) after "
              f"the contention began, and then runs at {a_rec:.1f} samples/s ({100 * a_rec / a_b:.0f}% of before) "
              f"over {len(recovered)} steps." if sw else "never switches."))
    return f.finish("Under background traffic on the STAR root's link, throughput drops (about 30 -> 19 "
                    "img/s); KungFu's monitored allreduce detects it, the workers vote and switch strategy "
                    "at iteration ~32, and throughput recovers (to about 27 img/s).", cfg, res)


if __name__ == "__main__":
    main(body)
