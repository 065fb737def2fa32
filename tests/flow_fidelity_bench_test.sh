#!/usr/bin/env bash
# The flow-vs-ns-3 benchmark's harness on one small scenario at two seeds: both tables have the
# row, the second seed really ran at seed + 1, and a bad --seeds is refused before anything runs.
#   tests/flow_fidelity_bench_test.sh BUILD_DIR OUT_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"
out="$2"
rm -rf "$out"

fail() { echo "FAIL: $*" >&2; exit 1; }

for bad in 0 -1 two; do
  rc=0
  err="$(bash "$here/bench/flow_fidelity.sh" "$build" --out "$out" --seeds "$bad" resize 2>&1)" || rc=$?
  [[ $rc -eq 2 ]] || fail "--seeds $bad: exit $rc, expected 2"
  [[ "$err" == *"--seeds"* ]] || fail "--seeds $bad: the error does not name --seeds: $err"
  [[ ! -e "$out" ]] || fail "--seeds $bad: it wrote $out"
done

bash "$here/bench/flow_fidelity.sh" "$build" --out "$out" --seeds 2 resize
grep -q '^resize,18,' "$out/flow_fidelity.csv" || fail "no resize row in flow_fidelity.csv"
grep -q '^resize,2,' "$out/flow_fidelity_seeds.csv" || fail "no 2-seed resize row in flow_fidelity_seeds.csv"
for world in ns3 flow; do
  python3 - "$out/seed2/resize/$world/summary.json" <<'PY' || fail "seed 2's $world run"
import json, sys
seed = json.load(open(sys.argv[1]))["seed"]
sys.exit(0 if seed == 2 else f"ran at seed {seed}, expected 2")
PY
done
grep -q 'Over 2 seeds: within 10% of ns-3 in' "$out/flow_fidelity.md" || fail "no seeds summary"
echo "flow_fidelity_bench: ok"
