#!/usr/bin/env bash
# Chunk sizes between bench/peers.sh's network namespaces (10 Gbit/s tbf links, TCP): kfbench
# with the engine's default chunk (1 MiB) and with -chunk 256K and 512K, one bench/peers.sh run
# each per round, in that order. Run from the repository root after a release build, as root.
#   bench/results/netns-chunks-2026-12-07/rounds.sh RANKS SIZES [ROUNDS] [OUT]
#     e.g. rounds.sh 2 1M,2M 10    rounds.sh 4 1M,2M,4M 8
# Writes OUT (default here/rounds-RANKSr.csv): round,system,bytes,busbw (system: the chunk).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ranks=${1:?ranks}
sizes=${2:?sizes}
rounds=${3:-10}
out=${4:-$here/rounds-${ranks}r.csv}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "round,system,bytes,busbw" > "$out"
for r in $(seq 1 "$rounds"); do
  for chunk in default 256K 512K; do
    args=""
    [ "$chunk" = default ] || args="-chunk $chunk"
    KF_PEERS_KFBENCH_ARGS="$args" KF_PEERS_RUN_TIMEOUT=60 bench/peers.sh build/release \
      --worlds netns --sizes "$sizes" --ranks "$ranks" --iters 30 --warmup 5 --systems kfbench \
      --out "$tmp/run" > /dev/null 2>&1 || true
    [ -f "$tmp/run/peers.csv" ] || continue
    tail -n +2 "$tmp/run/peers.csv" |
      awk -F, -v r="$r" -v s="$chunk" '$6 != "" {print r "," s "," $4 "," $9}' >> "$out"
    rm -rf "$tmp/run"
  done
done
