#!/usr/bin/env bash
# The same AUTO against -auto-halving-doubling 0 (the ring) between loopback pseudo-hosts
# (bench/peers.sh --worlds host: 127.0.0.1..4, a host each to the engine, 2 shared cores), kfbench
# alone, ROUNDS alternated pairs. Run from the repository root.
#   bench/results/netns-4rank-strategies-2026-11-29/host.sh ROUNDS SIZES
# Writes runs/host-{auto,ring}-ROUND/ here and appends to host.csv:
# round,variant,system,ranks,bytes,p50_us,busbw_GBps.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=$1 sizes=$2
[[ -f "$here/host.csv" ]] || echo "round,variant,system,ranks,bytes,p50_us,busbw_GBps" >"$here/host.csv"
for r in $(seq 1 "$rounds"); do
  order=(auto ring)
  ((r % 2)) || order=(ring auto)
  for v in "${order[@]}"; do
    out="$here/runs/host-$v-$r"
    args=""
    [[ $v == ring ]] && args="-auto-halving-doubling 0"
    KF_PEERS_KFBENCH_ARGS="$args" bench/peers.sh --worlds host --ranks 4 --sizes "$sizes" \
      --systems kfbench --iters 30 --warmup 3 --out "$out" >"$out.log" 2>&1 ||
      echo "run $v $r failed" >&2
    grep -v '^system' "$out/peers.csv" | awk -F, -v r="$r" -v v="$v" \
      '{print r "," v "," $1 "," $2 "," $4 "," $6 "," $9}' >>"$here/host.csv"
    echo "round $r $v done" >&2
  done
done
