#!/usr/bin/env bash
# kfbench before and after the TCP write slice, in alternated runs of bench/peers.sh (root, for
# the netns world), each beside Open MPI and Gloo in the same invocation. OLD: a build directory
# from before the change (apps/kfrun, apps/kfbench, bench/mpi_allreduce, bench/gloo_allreduce);
# the tree's build/release is "new". Run from the repository root.
#   OLD=/path/to/old/build bench/results/tcp-write-slice-2026-11-29/pairs.sh WORLD RANKS SIZES ROUNDS
# Writes runs/WORLD-BUILD-ROUND/ (peers.sh's output) here and appends to WORLD.csv:
# round,build,system,ranks,bytes,p50_us,busbw_GBps.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
old=${OLD:?set OLD to a build directory from before the change}
world=$1 ranks=$2 sizes=$3 rounds=$4
systems=kfbench,mpi,gloo
[[ -f "$here/$world.csv" ]] || echo "round,build,system,ranks,bytes,p50_us,busbw_GBps" >"$here/$world.csv"
for r in $(seq 1 "$rounds"); do
  order=(old new)
  ((r % 2)) || order=(new old)
  for b in "${order[@]}"; do
    dir=$PWD/build/release
    [[ $b == old ]] && dir=$old
    out="$here/runs/$world-$b-$r"
    bench/peers.sh "$dir" --worlds "$world" --ranks "$ranks" --sizes "$sizes" --systems "$systems" \
      --iters 20 --warmup 3 --out "$out" >"$out.log" 2>&1 || echo "run $world $b $r failed" >&2
    grep -v '^system' "$out/peers.csv" | awk -F, -v r="$r" -v b="$b" \
      '{print r "," b "," $1 "," $2 "," $4 "," $6 "," $9}' >>"$here/$world.csv"
    echo "$world round $r $b done" >&2
  done
done
