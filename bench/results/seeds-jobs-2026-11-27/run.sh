#!/usr/bin/env bash
# scenarios/strategies.yaml (11 strategies, ns-3 world, as shipped) at 3 seeds: --jobs 1 against
# --jobs 2, alternated, REPEATS times each; wall seconds into times.csv, and a check that the two
# give byte-identical records (perf.json aside).
#
#   bench/results/seeds-jobs-2026-11-27/run.sh KFSIM [REPEATS]
set -euo pipefail
kfsim="$1"
repeats="${2:-2}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "repeat,jobs,wall_s" >"$here/times.csv"
for r in $(seq 1 "$repeats"); do
  for jobs in 1 2; do
    start=$(date +%s.%N)
    "$kfsim" "$root/scenarios/strategies.yaml" --seeds 3 --jobs "$jobs" -q --out "$work/j$jobs"
    end=$(date +%s.%N)
    echo "$r,$jobs,$(echo "$end - $start" | bc)" | tee -a "$here/times.csv"
  done
done
digest() { (cd "$1" && find . -type f ! -name perf.json | LC_ALL=C sort | xargs sha256sum); }
if [[ "$(digest "$work/j1")" == "$(digest "$work/j2")" ]]; then
  echo "identical: yes ($(digest "$work/j1" | wc -l) records)" | tee "$here/identical.txt"
else
  echo "identical: NO" | tee "$here/identical.txt"
fi
cp "$work/j1/sweep.csv" "$here/sweep.csv"
