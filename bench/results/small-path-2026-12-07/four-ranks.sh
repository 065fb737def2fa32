#!/usr/bin/env bash
# 8-byte allreduces at 4 ranks on the 2 cores, round after round: Open MPI (shared memory,
# oversubscribed) and kfbench busy-polling, in the same round. Run from the repository root after
# a release build.
#   bench/results/small-path-2026-12-07/four-ranks.sh [ROUNDS] [OUT]
# Writes OUT (default four-ranks.csv here): round,system,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
B=build/release
rounds=${1:-12}
out=${2:-$here/four-ranks.csv}
echo "round,system,p50_us" > "$out"
for i in $(seq 1 "$rounds"); do
  mpirun --allow-run-as-root -np 4 --oversubscribe --bind-to none --mca pml ob1 --mca btl vader,self \
    $B/bench/mpi_allreduce --sizes 8 --iters 3000 --warmup 300 |
    grep '^mpi,' | awk -F, -v r="$i" '{print r ",mpi_allreduce_8B," $6}' >> "$out"
  KUNGFU_BUSY_POLL=1 $B/apps/kfrun -np 4 "$PWD/$B/apps/kfbench" allreduce -b 8 -e 8 -n 3000 -w 300 2>&1 |
    grep -E '^\S*\s+[0-9]+ ' | grep -v '^\[kfrun\]' | awk -v r="$i" '{print r ",kfbench_busy_allreduce_8B," $11}' >> "$out"
done
