#!/usr/bin/env bash
# The crossing alone beside the two allreduces (README.md, "The crossing alone"): ROUNDS rounds of
# bench/shm_ring_pingpong (80-byte frames, one way), Open MPI's 8-byte allreduce at 2 ranks and
# busy-polling kfbench's. Run from the repository root after a release build.
#   bench/results/blocking-inline-2026-12-07/crossing.sh [ROUNDS] [OUT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
B=build/release
rounds=${1:-8}
out=${2:-$here/crossing.csv}
echo "round,system,p50_us" > "$out"
for i in $(seq 1 "$rounds"); do
  $B/bench/shm_ring_pingpong --rounds 1 | awk -F, -v r="$i" '{print r ",ring_one_way_80B," $5}' >> "$out"
  mpirun --allow-run-as-root -np 2 --bind-to none --mca pml ob1 --mca btl vader,self \
    $B/bench/mpi_allreduce --sizes 8 --iters 30000 --warmup 1000 |
    grep '^mpi,' | awk -F, -v r="$i" '{print r ",mpi_allreduce_8B," $6}' >> "$out"
  KUNGFU_BUSY_POLL=1 $B/apps/kfrun -np 2 $B/apps/kfbench allreduce -b 8 -e 8 -n 50000 -w 1000 2>&1 |
    grep -E '^\S*\s+[0-9]+ ' | grep -v '^\[kfrun\]' |
    awk -v r="$i" '{print r ",kfbench_busy_allreduce_8B," $11}' >> "$out"
done
