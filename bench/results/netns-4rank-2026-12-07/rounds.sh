#!/usr/bin/env bash
# 4 ranks between bench/peers.sh's 4 network namespaces (10 Gbit/s tbf links), 1 and 2 MiB (and
# 4 MiB in the second mode), in rounds. Run from the repository root after a release build, as root.
#   bench/results/netns-4rank-2026-12-07/rounds.sh beside-mpi [ROUNDS]   AUTO, RING_RS_AG, Open MPI
#   bench/results/netns-4rank-2026-12-07/rounds.sh auto-vs-ring [ROUNDS] AUTO against RING_RS_AG,
#                                                                        the order alternated
# Writes beside-mpi.csv (round,system,strategy,bytes,p50_us,busbw) or auto-vs-ring.csv
# (round,strategy,bytes,p50_us,busbw) here. A run gets 60 s (an mpirun that hangs while it starts
# its daemons in the namespaces is cut off there and leaves no row).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mode=${1:?beside-mpi or auto-vs-ring}
rounds=${2:-6}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # SIZES SYSTEM [STRATEGY]: one bench/peers.sh run, its rows left in $tmp/run/peers.csv
  local args=(--systems "$2")
  [ "${3:-AUTO}" != AUTO ] && args+=(--kf-strategy "$3")
  KF_PEERS_RUN_TIMEOUT=60 bench/peers.sh --worlds netns --sizes "$1" --ranks 4 --iters 40 \
    --warmup 5 "${args[@]}" --out "$tmp/run" > /dev/null 2>&1 || true
}
if [ "$mode" = beside-mpi ]; then
  out=$here/beside-mpi.csv
  echo "round,system,strategy,bytes,p50_us,busbw" > "$out"
  for r in $(seq 1 "$rounds"); do
    for s in AUTO RING_RS_AG mpi; do
      if [ "$s" = mpi ]; then run 1M,2M mpi; else run 1M,2M kfbench "$s"; fi
      tail -n +2 "$tmp/run/peers.csv" |
        awk -F, -v r="$r" -v s="$s" '{print r "," $1 "," s "," $4 "," $6 "," $9}' >> "$out"
    done
  done
else
  out=$here/auto-vs-ring.csv
  echo "round,strategy,bytes,p50_us,busbw" > "$out"
  for r in $(seq 1 "$rounds"); do
    order="AUTO RING_RS_AG"
    [ $((r % 2)) = 0 ] && order="RING_RS_AG AUTO"
    for s in $order; do
      run 1M,2M,4M kfbench "$s"
      tail -n +2 "$tmp/run/peers.csv" |
        awk -F, -v r="$r" -v s="$s" '{print r "," s "," $4 "," $6 "," $9}' >> "$out"
    done
  done
fi
