#!/usr/bin/env bash
# rounds.sh's question again with the order alternated: each round runs kfbench between
# bench/peers.sh's namespaces at 2 ranks with the engine's default chunk and with -chunk 256K, the
# default first in odd rounds and second in even ones (rounds.sh always ran it first). With
# CONTROL=1, each round runs the default twice instead, rows labelled "first" and "second": how
# far two runs of one build apart by seconds differ. Run from the repository root after a release
# build, as root:
#   [CONTROL=1] bench/results/netns-chunks-2026-12-07/abba.sh [ROUNDS] [OUT] [SIZES]
# Writes OUT (default here/rounds-2r-abba.csv, or -aa.csv with CONTROL=1):
# round,system,bytes,busbw (system: the chunk, or the run's place in its round).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
control=${CONTROL:-0}
rounds=${1:-10}
if ((control)); then out=${2:-$here/rounds-2r-aa.csv}; else out=${2:-$here/rounds-2r-abba.csv}; fi
sizes=${3:-1M,2M}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "round,system,bytes,busbw" >"$out"
for r in $(seq 1 "$rounds"); do
  if ((control)); then order="first second"
  elif ((r % 2)); then order="default 256K"
  else order="256K default"; fi
  for run in $order; do
    args=""
    [ "$run" != 256K ] || args="-chunk 256K"
    KF_PEERS_KFBENCH_ARGS="$args" KF_PEERS_RUN_TIMEOUT=60 bench/peers.sh build/release \
      --worlds netns --sizes "$sizes" --ranks 2 --iters 30 --warmup 5 --systems kfbench \
      --out "$tmp/run" >/dev/null 2>&1 || true
    [ -f "$tmp/run/peers.csv" ] || continue
    tail -n +2 "$tmp/run/peers.csv" |
      awk -F, -v r="$r" -v s="$run" '$6 != "" {print r "," s "," $4 "," $9}' >>"$out"
    rm -rf "$tmp/run"
  done
done
