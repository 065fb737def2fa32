#!/usr/bin/env bash
# Busy-polling 8-byte allreduces at 2 ranks beside Open MPI's, round after round: each round runs
# bench/shm_ring_pingpong (80-byte frames one way: the crossing alone), Open MPI's 8-byte
# allreduce (shared memory) and busy-polling kfbench built before the change ($OLD) and after (the
# tree's), the two kfbench builds in alternating order. Run from the repository root after a
# release build.
#   OLD=/path/to/old/kfbench bench/results/small-path-2026-12-07/rounds.sh [ROUNDS] [OUT]
# Writes OUT (default rounds.csv here): round,system,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
B=build/release
rounds=${1:-60}
out=${2:-$here/rounds.csv}
old=${OLD:?set OLD to the kfbench built before the change}
echo "round,system,p50_us" > "$out"
kfbench() {  # ROUND SYSTEM BINARY
  KUNGFU_BUSY_POLL=1 $B/apps/kfrun -np 2 "$3" allreduce -b 8 -e 8 -n 50000 -w 1000 2>&1 |
    grep -E '^\S*\s+[0-9]+ ' | grep -v '^\[kfrun\]' | awk -v r="$1" -v s="$2" '{print r "," s "," $11}' >> "$out"
}
for i in $(seq 1 "$rounds"); do
  $B/bench/shm_ring_pingpong --rounds 1 | awk -F, -v r="$i" '{print r ",ring_one_way_80B," $5}' >> "$out"
  mpirun --allow-run-as-root -np 2 --bind-to none --mca pml ob1 --mca btl vader,self \
    $B/bench/mpi_allreduce --sizes 8 --iters 30000 --warmup 1000 |
    grep '^mpi,' | awk -F, -v r="$i" '{print r ",mpi_allreduce_8B," $6}' >> "$out"
  if [ $((i % 2)) = 1 ]; then
    kfbench "$i" kfbench_before "$old"; kfbench "$i" kfbench_after "$PWD/$B/apps/kfbench"
  else
    kfbench "$i" kfbench_after "$PWD/$B/apps/kfbench"; kfbench "$i" kfbench_before "$old"
  fi
done
