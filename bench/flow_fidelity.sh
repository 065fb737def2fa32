#!/usr/bin/env bash
# The flow world against ns-3 on every shipped scenario (issue 9's target: per-step time within
# 10%, at least 100x faster): `kfsim --compare ns3,flow` on each of scenarios/*.yaml (each sweep
# value, each variants arm), then one table of mean |per-step difference|, wall-time speedup,
# what ns-3 lost (dropped packets, retransmission timeouts) and the flow world's window backoffs
# and timeouts.
#   bench/flow_fidelity.sh [BUILD_DIR] [--out DIR] [--set KEY=VALUE ...] [SCENARIO ...]
#                                                                     (./kf bench flow_fidelity)
# SCENARIO: a name in scenarios/ without .yaml (default: all but the flow-only scale-1024).
# --set: one more `kfsim --set` for both worlds of every run (repeatable): the same table under
# another setting, e.g. --set topology.link.queue=2000 (switch queues deep enough that ns-3
# drops nothing).
# Writes DIR/flow_fidelity.csv and DIR/flow_fidelity.md (DIR: out/flow_fidelity); exit 1 when a
# run fails, 2 on bad arguments. Reported, not asserted: a cell outside 10% does not fail it.
# About 6 minutes on the 2-core development machine (the sum of the scenarios' compare runs).
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
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) [[ $# -ge 2 ]] || { echo "flow_fidelity: --out needs a directory" >&2; exit 2; }
      out="$2"; shift ;;
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

failed=0
for n in "${names[@]}"; do
  echo "== $n"
  start=$SECONDS
  if ! "$kfsim" "$here/scenarios/$n.yaml" --compare ns3,flow --quiet --out "$out/$n" ${sets[@]+"${sets[@]}"} \
      >"$out/$n.log" 2>&1; then
    echo "   FAILED (exit $?): $out/$n.log"
    failed=1
  fi
  echo "   $((SECONDS - start)) s"
done

KF_FIDELITY_SETS="${sets[*]+${sets[*]}}" python3 - "$out" "${names[@]}" <<'PY'
import csv, json, os, sys

out, names = sys.argv[1], sys.argv[2:]


def load(path):
    with open(path) as f:
        return json.load(f)


def cells(name):
    """(label, directory holding ns3/ and flow/) for a plain run, each sweep value or arm."""
    base = os.path.join(out, name)
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
        wall_ns3 = load(os.path.join(d, "ns3", "perf.json"))["wall_seconds"]
        wall_flow = load(os.path.join(d, "flow", "perf.json"))["wall_seconds"]
        mean = sum(diffs) / len(diffs) if diffs else float("nan")
        rows.append({
            "cell": label, "steps": len(diffs),
            "ns3_median_step_s": ns3["step_time_s"]["median"],
            "flow_median_step_s": flow["step_time_s"]["median"],
            "mean_abs_pct": round(mean, 3), "max_abs_pct": round(max(diffs, default=float("nan")), 3),
            "within_10pct": mean <= 10,
            "ns3_wall_s": round(wall_ns3, 3), "flow_wall_s": round(wall_flow, 4),
            "speedup": round(wall_ns3 / wall_flow, 1) if wall_flow > 0 else float("inf"),
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
lines = [
    "| cell | steps | ns-3 median step s | flow median step s | mean abs diff % | max % | "
    "speedup | ns-3 drops | ns-3 RTOs | flow backoffs | flow RTOs |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]
for r in rows:
    mark = "" if r["within_10pct"] else " **(> 10%)**"
    lines.append(f"| {r['cell']} | {r['steps']} | {r['ns3_median_step_s']:.4f} | "
                 f"{r['flow_median_step_s']:.4f} | {r['mean_abs_pct']:.2f}{mark} | {r['max_abs_pct']:.2f} | "
                 f"x{r['speedup']:.0f} | {r['ns3_dropped_packets']} | {r['ns3_retransmission_timeouts']} | "
                 f"{r['flow_window_backoffs']} | {r['flow_retransmission_timeouts']} |")
lines += ["", f"Within 10% of ns-3: {within} of {len(rows)} cells; at least 100x faster: {fast} of {len(rows)}."]
if os.environ.get("KF_FIDELITY_SETS"):  # a table under another setting says so
    lines += ["", f"Every run with: {os.environ['KF_FIDELITY_SETS']}"]
with open(os.path.join(out, "flow_fidelity.md"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
print(f"\n  {out}/flow_fidelity.csv, {out}/flow_fidelity.md")
PY
exit "$failed"
