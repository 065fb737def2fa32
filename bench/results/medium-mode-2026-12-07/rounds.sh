#!/usr/bin/env bash
# The one-host medium-size mode: 2 ranks, 256 KiB and 1 MiB allreduces, round after round, each
# round running kfbench in the default mode, kfbench busy-polling and Open MPI (shared memory),
# in that order, one job each. Run from the repository root after a release build.
#   bench/results/medium-mode-2026-12-07/rounds.sh [ROUNDS] [OUT]
# Writes OUT (default rounds.csv here): round,system,bytes,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
B=build/release
rounds=${1:-24}
out=${2:-$here/rounds.csv}
echo "round,system,bytes,p50_us" > "$out"
for i in $(seq 1 "$rounds"); do
  for mode in 0 1; do
    system=$([ "$mode" = 1 ] && echo kfbench_busy_poll || echo kfbench_default)
    KUNGFU_BUSY_POLL=$mode $B/apps/kfrun -np 2 $B/apps/kfbench allreduce -b 256K -e 1M -f 4 -n 2000 -w 50 2>&1 |
      grep -E '^\S*\s+[0-9]+ ' | grep -v '^\[kfrun\]' |
      awk -v r="$i" -v s="$system" '{print r "," s "," $2 "," $11}' >> "$out"
  done
  mpirun --allow-run-as-root -np 2 --bind-to none --mca pml ob1 --mca btl vader,self \
    $B/bench/mpi_allreduce --sizes 262144,1048576 --iters 2000 --warmup 50 |
    grep '^mpi,' | awk -F, -v r="$i" '{print r ",open_mpi," $4 "," $6}' >> "$out"
  echo "round $i of $rounds" >&2
done
