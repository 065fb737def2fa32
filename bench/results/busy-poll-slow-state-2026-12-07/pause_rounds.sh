#!/usr/bin/env bash
# A pause on each idle turn of a quietly spinning driver, judged by the state the host put the
# two CPUs in: each round runs bench/shm_ring_pingpong (the crossing alone: about 0.055 us one way
# where the two vCPUs are hardware threads of one core, 0.12 on two cores, 0.43-0.46 farther
# apart), busy-polling kfbench 8-byte allreduces at 2 workers built before ($OLD) and after (the
# tree's) in alternating order, and Open MPI's 8-byte allreduce at 2 ranks. Run from the
# repository root after a release build.
#   OLD=/path/to/old/kfbench bench/results/busy-poll-slow-state-2026-12-07/pause_rounds.sh \
#     [ROUNDS] [OUT]
# Writes OUT (default pause_rounds.csv here): round,measure,value (p50 us).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
B=build/release
rounds=${1:-240}
out=${2:-$here/pause_rounds.csv}
old=${OLD:?set OLD to the kfbench built before the change}
echo "round,measure,value" > "$out"
kf() {  # ROUND MEASURE BINARY
  KUNGFU_BUSY_POLL=1 $B/apps/kfrun -np 2 "$3" allreduce -b 8 -e 8 -n 100000 -w 2000 2>&1 |
    grep -E '^\S*\s+[0-9]+ ' | grep -v '^\[kfrun\]' | awk -v r="$1" -v m="$2" '{print r "," m "," $11}' >> "$out"
}
for i in $(seq 1 "$rounds"); do
  $B/bench/shm_ring_pingpong --rounds 1 --iters 50000 | awk -F, -v r="$i" '{print r ",crossing_us," $5}' >> "$out"
  if [ $((i % 2)) = 1 ]; then
    kf "$i" kf_before_us "$old"; kf "$i" kf_after_us "$PWD/$B/apps/kfbench"
  else
    kf "$i" kf_after_us "$PWD/$B/apps/kfbench"; kf "$i" kf_before_us "$old"
  fi
  mpirun --allow-run-as-root -np 2 --bind-to none --mca pml ob1 --mca btl vader,self \
    $B/bench/mpi_allreduce --sizes 8 --iters 30000 --warmup 1000 |
    grep '^mpi,' | awk -F, -v r="$i" '{print r ",mpi_2ranks_us," $6}' >> "$out"
  echo "round $i of $rounds done" >&2
done
