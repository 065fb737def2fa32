#!/usr/bin/env bash
# Short 8-byte jobs between bench/peers.sh's namespaces at 2 ranks, with the peers run's own
# warm-up (20 calls) and with 2,000: does a job that starts slow (its two workers on one CPU)
# settle within the longer warm-up? Each round runs kfbench and Open MPI (200 calls after the
# warm-up, one bench/peers.sh run each) with both warm-ups, their order alternated by round. Run
# from the repository root after a release build, as root:
#   bench/results/netns-small-warmup-2026-12-07/rounds.sh [ROUNDS] [OUT]
# Writes OUT (default here/rounds.csv): round,system,warmup,bytes,p50_us.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=${1:-24}
out=${2:-$here/rounds.csv}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "round,system,warmup,bytes,p50_us" >"$out"
for r in $(seq 1 "$rounds"); do
  if ((r % 2)); then order="20 2000"; else order="2000 20"; fi
  for w in $order; do
    for sys in kfbench mpi; do
      KF_PEERS_RUN_TIMEOUT=60 bench/peers.sh build/release --worlds netns --sizes 8 --ranks 2 \
        --iters 200 --warmup "$w" --systems "$sys" --out "$tmp/run" >/dev/null 2>&1 || true
      [ -f "$tmp/run/peers.csv" ] || continue
      tail -n +2 "$tmp/run/peers.csv" |
        awk -F, -v r="$r" -v w="$w" '$6 != "" {print r "," $1 "," w "," $4 "," $6}' >>"$out"
      rm -rf "$tmp/run"
    done
  done
done
