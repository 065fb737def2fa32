#!/usr/bin/env bash
# After AUTO took HALVING_DOUBLING across hosts at 4 ranks: kfbench's AUTO beside Open MPI and
# Gloo in one bench/peers.sh invocation, then kfbench alone with -auto-halving-doubling 0 (the
# ring, AUTO before), ROUNDS times between 4 network namespaces. Run from the repository root as
# root.
#   bench/results/netns-4rank-strategies-2026-11-29/after.sh ROUNDS SIZES
# Writes runs/after-{auto,ring}-ROUND/ (peers.sh's output) here and appends to after.csv:
# round,variant,system,ranks,bytes,p50_us,busbw_GBps.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=$1 sizes=$2
[[ -f "$here/after.csv" ]] || echo "round,variant,system,ranks,bytes,p50_us,busbw_GBps" >"$here/after.csv"
for r in $(seq 1 "$rounds"); do
  for v in auto ring; do
    out="$here/runs/after-$v-$r"
    if [[ $v == auto ]]; then
      systems=kfbench,mpi,gloo
      args=""
    else
      systems=kfbench
      args="-auto-halving-doubling 0"
    fi
    KF_PEERS_KFBENCH_ARGS="$args" bench/peers.sh --worlds netns --ranks 4 --sizes "$sizes" \
      --systems "$systems" --iters 30 --warmup 3 --out "$out" >"$out.log" 2>&1 ||
      echo "run $v $r failed" >&2
    grep -v '^system' "$out/peers.csv" | awk -F, -v r="$r" -v v="$v" \
      '{print r "," v "," $1 "," $2 "," $4 "," $6 "," $9}' >>"$here/after.csv"
    echo "round $r $v done" >&2
  done
done
