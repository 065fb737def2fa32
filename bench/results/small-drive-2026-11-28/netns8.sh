#!/bin/bash
# 8 B and 4 KiB allreduces between network namespaces (TCP, 10 Gbit/s tbf links), 2 and 4 ranks:
# kfbench by default (the caller drives blocking calls of at most 64 KiB) and with
# KUNGFU_CALLER_DRIVES=0 (the loop's thread does the work, the default before), each beside Open
# MPI (TCP BTL), $1 runs alternated. Writes run,mode,system,ranks,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
runs=${1:-4}; out=$2; tmp=$(mktemp -d)
echo "run,mode,system,ranks,bytes,p50_us" > "$out"
for run in $(seq 1 "$runs"); do
  modes="default loop"; [ $((run % 2)) = 0 ] && modes="loop default"
  for mode in $modes; do
    env=(); [ "$mode" = loop ] && env=(KUNGFU_CALLER_DRIVES=0)
    env "${env[@]}" bench/peers.sh build/release --worlds netns --sizes 8,4K --ranks 2,4 --iters 500 \
      --warmup 50 --systems kfbench,mpi --out "$tmp/r" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    # peers.csv: system,ranks,where,bytes,iterations,p50_us,...
    tail -n +2 "$tmp/r/peers.csv" | awk -F, -v r="$run" -v m="$mode" '{print r "," m "," $1 "," $2 "," $4 "," $6}' >> "$out"
  done
done
rm -rf "$tmp"
