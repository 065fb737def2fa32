#!/usr/bin/env bash
# The flow world against ns-3 on every shipped scenario (the target: per-step time within
# 10%, at least 100x faster): `kfsim --compare ns3,flow` on each of scenarios/*.yaml (each sweep
# value, each variants arm), then one table of mean |per-step difference|, wall-time speedup,
# what ns-3 lost (dropped packets, retransmission timeouts) and the flow world's window backoffs
# and timeouts. A numeric workload's learning costs the same wall time in both worlds: its cells
# give the speedup without it too (perf.json's learning_wall_seconds).
#   bench/flow_fidelity.sh [BUILD_DIR] [--out DIR] [--seeds N] [--set KEY=VALUE ...] [SCENARIO ...]
#                                                                     (./kf bench flow_fidelity)
# SCENARIO: a name in scenarios/ without .yaml (default: all but the flow-only scale-1024).
# --set: one more `kfsim --set` for both worlds of every run (repeatable): the same table under
# another setting, e.g. --set topology.link.queue=2000 (switch queues deep enough that ns-3
# drops nothing).
# --seeds N: also run every cell at the N-1 seeds after the scenario's own (into DIR/seedK/). TCP
# over drop-tail queues is chaotic: a drop, a retransmission timeout, lands in one step or
# another with the seed, in ns-3 as in the flow world. A second table then sets the flow world's
# distance from ns-3 over the seeds beside ns-3's distance from itself (the same cell, two seeds:
# the noise floor of a per-step comparison) and the bias of the mean step time over all seeds.
# Writes DIR/flow_fidelity.csv and DIR/flow_fidelity.md (DIR: out/flow_fidelity), with --seeds
# also DIR/flow_fidelity_seeds.csv; exit 1 when a run fails, 2 on bad arguments. Reported, not
# asserted: a cell outside 10% does not fail it.
# About 11 minutes a seed on the 2-core development machine (the sum of the scenarios' compare
# runs).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$here/build/release"
if [[ $# -gt 0 && -d "$1" ]]; then
  build="$1"
  shift
fi
out="$here/out/flow_fidelity"
names=()
sets=()
seeds=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { echo "flow_fidelity: --out needs a directory" >&2; exit 2; }
      out="$2"; shift ;;
    --seeds) [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || {
        echo "flow_fidelity: --seeds needs a count of at least 1, got '${2-}'" >&2; exit 2; }
      seeds="$2"; shift ;;
    --set) [[ $# -ge 2 && "$2" == *=* ]] || { echo "flow_fidelity: --set needs KEY=VALUE" >&2; exit 2; }
      sets+=(--set "$2"); shift ;;
    -*) echo "flow_fidelity: unknown option '$1'" >&2; exit 2 ;;
    *) [[ -f "$here/scenarios/$1.yaml" ]] || {
         echo "flow_fidelity: no scenario scenarios/$1.yaml" >&2; exit 2; }
       names+=("$1") ;;
  esac
  shift
done
if [[ ${#names[@]} -eq 0 ]]; then
  for f in "$here"/scenarios/*.yaml; do
    n="$(basename "$f" .yaml)"
    # Flow-only: ns-3 would need hours for 1,024 workers (bench/flow_scale.sh measures it).
    [[ "$n" == scale-1024 ]] || names+=("$n")
  done
fi
kfsim="$build/apps/kfsim"
[[ -x "$kfsim" ]] || { echo "flow_fidelity: no $kfsim (build first: ./kf setup)" >&2; exit 2; }
mkdir -p "$out"

# The scenario's seed, or the one a --set gives.
base_seed() {
  local seed
  seed="$(awk '/^seed:/ {print $2; exit}' "$here/scenarios/$1.yaml")"
  for s in ${sets[@]+"${sets[@]}"}; do
    [[ "$s" == seed=* ]] && seed="${s#seed=}"
  done
  echo "${seed:-1}"
}

failed=0
for n in "${names[@]}"; do
  for ((k = 1; k <= seeds; k++)); do
    dir="$out/$n"
    extra=()
    if ((k > 1)); then
      dir="$out/seed$k/$n"
      extra=(--set "seed=$(($(base_seed "$n") + k - 1))")
      mkdir -p "$out/seed$k"
    fi
    echo "== $n${extra[*]+ ${extra[*]}}"
    start=$SECONDS
    if ! "$kfsim" "$here/scenarios/$n.yaml" --compare ns3,flow --quiet --out "$dir" \
        ${sets[@]+"${sets[@]}"} ${extra[@]+"${extra[@]}"} >"$dir.log" 2>&1; then
      echo "   FAILED (exit $?): $dir.log"
      failed=1
    fi
    echo "   $((SECONDS - start)) s"
  done
done

KF_FIDELITY_SETS="${sets[*]+${sets[*]}}" python3 - "$out" "$seeds" "${names[@]}" <<'PY'
import csv, itertools, json, os, sys

out, seeds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]


def load(path):
    with open(path) as f:
        return json.load(f)


def cells(name, root=out):
    """(label, directory holding ns3/ and flow/) for a plain run, each sweep value or arm."""
    base = os.path.join(root, name)
    if os.path.isdir(os.path.join(base, "ns3")):
        return [(name, base)]
    with open(os.path.join(base, "compare.csv")) as f:
        variants = [r["variant"] for r in csv.DictReader(f) if r["world"] == "ns3"]
    return [(f"{name} {v}", os.path.join(base, v)) for v in variants]


rows = []
for name in names:
    try:
        found = cells(name)
    except OSError:
        continue  # the run failed; its log says why
    for label, d in found:
        with open(os.path.join(d, "compare.csv")) as f:
            steps = list(csv.DictReader(f))
        diffs = [abs(float(r["flow_vs_ns3_pct"])) for r in steps if r["flow_vs_ns3_pct"]]
        ns3, flow = load(os.path.join(d, "ns3", "summary.json")), load(os.path.join(d, "flow", "summary.json"))
        perf_ns3, perf_flow = load(os.path.join(d, "ns3", "perf.json")), load(os.path.join(d, "flow", "perf.json"))
        wall_ns3, wall_flow = perf_ns3["wall_seconds"], perf_flow["wall_seconds"]
        # A numeric workload's learning (its data, its model's passes) costs the same wall time in
        # both worlds: the speedup without it is the worlds' own.
        learn_ns3 = perf_ns3.get("learning_wall_seconds", 0.0)
        learn_flow = perf_flow.get("learning_wall_seconds", 0.0)
        own_flow = wall_flow - learn_flow
        mean = sum(diffs) / len(diffs) if diffs else float("nan")
        rows.append({
            "cell": label, "steps": len(diffs),
            "ns3_median_step_s": ns3["step_time_s"]["median"],
            "flow_median_step_s": flow["step_time_s"]["median"],
            "mean_abs_pct": round(mean, 3), "max_abs_pct": round(max(diffs, default=float("nan")), 3),
            "within_10pct": mean <= 10,
            "ns3_wall_s": round(wall_ns3, 3), "flow_wall_s": round(wall_flow, 4),
            "speedup": round(wall_ns3 / wall_flow, 1) if wall_flow > 0 else float("inf"),
            "ns3_learning_s": round(learn_ns3, 3), "flow_learning_s": round(learn_flow, 3),
            "speedup_without_learning":
                round((wall_ns3 - learn_ns3) / own_flow, 1) if own_flow > 0 else float("inf"),
            "ns3_dropped_packets": ns3["world_stats"].get("dropped_packets", 0),
            "ns3_retransmission_timeouts": ns3["world_stats"].get("retransmission_timeouts", 0),
            "flow_window_backoffs": flow["world_stats"].get("tcp_losses", 0),
            "flow_retransmission_timeouts": flow["world_stats"].get("tcp_timeouts", 0),
        })

with open(os.path.join(out, "flow_fidelity.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["cell"])
    w.writeheader()
    w.writerows(rows)
within = sum(r["within_10pct"] for r in rows)
fast = sum(r["speedup"] >= 100 for r in rows)
fast_world = sum(r["speedup_without_learning"] >= 100 for r in rows)
learning = any(r["flow_learning_s"] > 0 for r in rows)
lines = [
    "| cell | steps | ns-3 median step s | flow median step s | mean abs diff % | max % | "
    "speedup | ns-3 drops | ns-3 RTOs | flow backoffs | flow RTOs |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]
for r in rows:
    mark = "" if r["within_10pct"] else " **(> 10%)**"
    speedup = f"x{r['speedup']:.0f}"
    if r["flow_learning_s"] > 0:
        speedup += f" (x{r['speedup_without_learning']:.0f} without the learning)"
    lines.append(f"| {r['cell']} | {r['steps']} | {r['ns3_median_step_s']:.4f} | "
                 f"{r['flow_median_step_s']:.4f} | {r['mean_abs_pct']:.2f}{mark} | {r['max_abs_pct']:.2f} | "
                 f"{speedup} | {r['ns3_dropped_packets']} | {r['ns3_retransmission_timeouts']} | "
                 f"{r['flow_window_backoffs']} | {r['flow_retransmission_timeouts']} |")
lines += ["", f"Within 10% of ns-3: {within} of {len(rows)} cells; at least 100x faster: {fast} of {len(rows)}"
          + (f"; {fast_world} of {len(rows)} without the learning arithmetic of numeric workloads (its "
             "data and its model's passes), which costs the same wall time in both worlds."
             if learning else ".")]


def step_times(d):
    """{step: (ns-3 s, flow s)} from a cell's compare.csv."""
    with open(os.path.join(d, "compare.csv")) as f:
        return {int(r["step"]): (float(r["ns3_s"]), float(r["flow_s"]))
                for r in csv.DictReader(f) if r["ns3_s"] and r["flow_s"]}


def distance(a, b):
    """Mean |b / a - 1| over the steps both have, in %."""
    common = [s for s in a if s in b and a[s] > 0]
    return 100 * sum(abs(b[s] / a[s] - 1) for s in common) / len(common) if common else float("nan")


def spread(runs):
    """A world's distance from itself: the mean over ordered pairs of seeds."""
    pairs = [distance(a, b) for a, b in itertools.permutations(runs, 2)]
    return sum(pairs) / len(pairs) if pairs else float("nan")


if seeds > 1:
    by_cell = {}
    for k in range(1, seeds + 1):
        root = out if k == 1 else os.path.join(out, f"seed{k}")
        for name in names:
            try:
                found = cells(name, root)
            except OSError:
                continue
            for label, d in found:
                try:
                    by_cell.setdefault(label, []).append(step_times(d))
                except OSError:
                    pass
    seed_rows = []
    for r in rows:
        runs = by_cell.get(r["cell"], [])
        ns3 = [{s: v[0] for s, v in run.items()} for run in runs]
        flow = [{s: v[1] for s, v in run.items()} for run in runs]
        per_seed = [distance(a, b) for a, b in zip(ns3, flow)]
        mean = sum(per_seed) / len(per_seed) if per_seed else float("nan")
        total_ns3 = sum(sum(run.values()) for run in ns3)
        bias = 100 * (sum(sum(run.values()) for run in flow) / total_ns3 - 1) if total_ns3 else float("nan")
        ns3_spread = spread(ns3)
        seed_rows.append({
            "cell": r["cell"], "seeds": len(runs),
            "flow_vs_ns3_mean_pct": round(mean, 3),
            "flow_vs_ns3_per_seed_pct": " ".join(f"{x:.1f}" for x in per_seed),
            "ns3_vs_ns3_pct": round(ns3_spread, 3), "flow_vs_flow_pct": round(spread(flow), 3),
            "mean_step_bias_pct": round(bias, 3),
            "within_10pct": mean <= 10,
            "within_10pct_or_ns3_spread": mean <= max(10, ns3_spread),
        })
    with open(os.path.join(out, "flow_fidelity_seeds.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(seed_rows[0]) if seed_rows else ["cell"])
        w.writeheader()
        w.writerows(seed_rows)
    lines += [
        "", f"Over {seeds} seeds (the scenario's and the {seeds - 1} after it): the flow world's mean "
        "|per-step difference| from ns-3 at the same seed, per seed and their mean; ns-3's from itself "
        "and the flow world's from itself at two different seeds (mean over pairs); the mean step "
        "time over every seed, flow against ns-3.", "",
        "| cell | seeds | flow vs ns-3 % (mean) | per seed % | ns-3 vs ns-3 % | flow vs flow % | "
        "mean step bias % |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in seed_rows:
        mark = "" if r["within_10pct"] else " **(> 10%)**"
        lines.append(f"| {r['cell']} | {r['seeds']} | {r['flow_vs_ns3_mean_pct']:.2f}{mark} | "
                     f"{r['flow_vs_ns3_per_seed_pct']} | {r['ns3_vs_ns3_pct']:.2f} | "
                     f"{r['flow_vs_flow_pct']:.2f} | {r['mean_step_bias_pct']:+.2f} |")
    n = len(seed_rows)
    lines += ["", f"Over {seeds} seeds: within 10% of ns-3 in {sum(r['within_10pct'] for r in seed_rows)} "
              f"of {n} cells; within 10% or within ns-3's own seed-to-seed distance in "
              f"{sum(r['within_10pct_or_ns3_spread'] for r in seed_rows)} of {n}; mean step time "
              f"within 10% in {sum(abs(r['mean_step_bias_pct']) <= 10 for r in seed_rows)} of {n}."]
if os.environ.get("KF_FIDELITY_SETS"):  # a table under another setting says so
    lines += ["", f"Every run with: {os.environ['KF_FIDELITY_SETS']}"]
with open(os.path.join(out, "flow_fidelity.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
print(f"\n  {out}/flow_fidelity.csv, {out}/flow_fidelity.md"
      + (f", {out}/flow_fidelity_seeds.csv" if seeds > 1 else ""))
PY
exit "$failed"
