#!/usr/bin/env bash
# kfbench's strategies at 4 ranks between network namespaces, each beside Open MPI in the same
# bench/peers.sh invocation, the strategies' order alternated from round to round. Run from the
# repository root as root.
#   [SYSTEMS=kfbench,mpi] bench/results/netns-4rank-strategies-2026-11-29/run.sh ROUNDS SIZES STRATEGY...
# Writes runs/STRATEGY-ROUND/ (peers.sh's output) here and appends to runs.csv:
# round,strategy,system,ranks,bytes,p50_us,busbw_GBps.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=$1 sizes=$2
shift 2
strategies=("$@")
[[ -f "$here/runs.csv" ]] || echo "round,strategy,system,ranks,bytes,p50_us,busbw_GBps" >"$here/runs.csv"
for r in $(seq 1 "$rounds"); do
  order=("${strategies[@]}")
  ((r % 2)) || mapfile -t order < <(printf '%s\n' "${strategies[@]}" | tac)
  for s in "${order[@]}"; do
    out="$here/runs/$s-$r"
    flag=()
    [[ $s == AUTO ]] || flag=(--kf-strategy "$s")
    bench/peers.sh --worlds netns --ranks 4 --sizes "$sizes" --systems "${SYSTEMS:-kfbench,mpi}" \
      --iters 30 --warmup 3 "${flag[@]}" --out "$out" >"$out.log" 2>&1 || echo "run $s $r failed" >&2
    grep -v '^system' "$out/peers.csv" | awk -F, -v r="$r" -v s="$s" \
      '{print r "," s "," $1 "," $2 "," $4 "," $6 "," $9}' >>"$here/runs.csv"
    echo "round $r $s done" >&2
  done
done
