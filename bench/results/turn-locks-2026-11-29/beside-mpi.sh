#!/bin/bash
# Busy-polling kfbench (the tree's) beside Open MPI through shared memory, 8 B, in alternated
# rounds: 30,000 calls at 2 ranks and 3,000 at 4 after a tenth as many; Open MPI 20,000 after
# 1,000 (--bind-to none; at 4 ranks on 2 cores, mpi_yield_when_idle). $1 rounds. Writes
# round,system,ranks,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
rounds=${1:-4}
out=${2:?give the CSV to write}
B=build/release
echo "round,system,ranks,bytes,p50_us" > "$out"
mpi() {
  mpirun --allow-run-as-root --oversubscribe -np "$1" --bind-to none --mca pml ob1 --mca btl vader,self \
    --mca mpi_yield_when_idle "$2" $B/bench/mpi_allreduce --sizes 8 --iters 20000 --warmup 1000 |
    grep '^mpi,' | cut -d, -f6
}
kf() {
  KUNGFU_BUSY_POLL=1 $B/apps/kfrun -np "$1" $B/apps/kfbench allreduce -b 8 -e 8 -n "$2" -w "$3" 2>&1 |
    grep -E '^\S*\s+[0-9]+ ' | grep -v '^\[kfrun\]' | awk '{print $11}'
}
for r in $(seq 1 "$rounds"); do
  echo "$r,mpi,2,8,$(mpi 2 0)" >> "$out"
  echo "$r,kfbench-busy,2,8,$(kf 2 30000 3000)" >> "$out"
  echo "$r,mpi,4,8,$(mpi 4 1)" >> "$out"
  echo "$r,kfbench-busy,4,8,$(kf 4 3000 300)" >> "$out"
done
