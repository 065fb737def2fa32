#!/usr/bin/env bash
# The flow world at scale: scenarios/scale-1024.yaml (1,024 workers, ResNet-50, RING_RS_AG,
# leaf-spine) for STEPS steps (default 100), with its wall time and peak resident memory.
#   bench/flow_scale.sh [BUILD_DIR | KFSIM] [STEPS]      (./kf bench flow_scale [STEPS])
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
kfsim="${1:-$here/build/release}"
[[ -d "$kfsim" ]] && kfsim="$kfsim/apps/kfsim"  # ./kf bench passes the build directory
steps="${2:-100}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
/usr/bin/time -v "$kfsim" "$here/scenarios/scale-1024.yaml" --set "steps=$steps" --out "$out" -q \
  2> "$out/time.txt"
wall=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wall_seconds"])' "$out/perf.json")
rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out/time.txt")
python3 - "$out" "$steps" "$wall" "$rss" <<'PY'
import json, sys
out, steps, wall, rss = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = json.load(open(out + "/summary.json"))
w = s["world_stats"]
print(f"scale-1024: {s['workers']} workers, {steps} steps, median step {s['step_time_s']['median']:.4f} s simulated")
print(f"  wall {wall:.1f} s   peak RSS {rss / 1024:.0f} MiB   {w['messages']} messages "
      f"({w['messages'] / wall / 1e3:.0f} k/s)   {w['rate_solves']} rate solves")
PY
