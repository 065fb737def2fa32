#!/usr/bin/env bash
# Receives posted by operations, between bench/peers.sh's network namespaces (10 Gbit/s tbf
# links, TCP): kfbench with landings (the default) and without (KUNGFU_LAND=0), beside a peer
# system, in rounds, the order of the two kfbench runs alternated. Run from the repository root
# after a release build, as root.
#   bench/results/landing-2026-12-07/rounds.sh RANKS SIZES PEER [ROUNDS] [OUT]
#     e.g. rounds.sh 2 4M,8M,64M gloo 8    rounds.sh 4 1M,2M,4M mpi 6
# WORLD=host in the environment: between loopback pseudo-hosts instead (TCP, no link limit).
# Writes OUT (default here/rounds-RANKSr.csv): round,system,ranks,bytes,p50_us,busbw_GBps, system
# being kf-land, kf-copy or the peer. A run gets 60 s (an mpirun that hangs while it starts its
# daemons in the namespaces is cut off there and leaves no row).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ranks=${1:?ranks}
sizes=${2:?sizes}
peer=${3:?gloo or mpi}
rounds=${4:-6}
out=${5:-$here/rounds-${ranks}r.csv}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # LABEL SYSTEM [ENV...]: one bench/peers.sh run, its rows appended to $out
  local label=$1 system=$2
  shift 2
  env "$@" KF_PEERS_RUN_TIMEOUT=60 bench/peers.sh --worlds "${WORLD:-netns}" --sizes "$sizes" \
    --ranks "$ranks" --iters 30 --warmup 5 --systems "$system" --out "$tmp/run" \
    > /dev/null 2>&1 || true
  [ -f "$tmp/run/peers.csv" ] || return 0  # peers.sh refused to start: no rows
  tail -n +2 "$tmp/run/peers.csv" | awk -F, -v r="$round" -v s="$label" \
    '$6 != "" {print r "," s "," $2 "," $4 "," $6 "," $9}' >> "$out"
  rm -rf "$tmp/run"
}
echo "round,system,ranks,bytes,p50_us,busbw_GBps" > "$out"
for round in $(seq 1 "$rounds"); do
  if [ $((round % 2)) = 1 ]; then
    run kf-land kfbench
    run kf-copy kfbench KUNGFU_LAND=0
  else
    run kf-copy kfbench KUNGFU_LAND=0
    run kf-land kfbench
  fi
  run "$peer" "$peer"
  echo "round $round done" >&2
done
