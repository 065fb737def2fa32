#!/usr/bin/env bash
# The machine's slow state, probed: each round runs probe.cc (a clock reading, a dependent
# floating-point step, pointer chases through 64 KiB, 512 KiB and 4 MiB, and how much slower
# integer work on CPU 0 runs while CPU 1 works too), bench/shm_ring_pingpong
# (an 80-byte frame one way between two processes: the crossing alone), then busy-polling kfbench
# 8-byte allreduces on 1 worker (on both CPUs, then pinned to CPU 0) and on 2 workers (with the
# default 1 MiB rings, then 16 KiB ones), and Open MPI's 8-byte allreduce at 2 ranks (shared
# memory). Run from the repository root after a release build.
#   bench/results/busy-poll-slow-state-2026-12-07/rounds.sh [ROUNDS] [OUT]
# Writes OUT (default rounds.csv here): round,measure,value (ns for the probe, p50 us otherwise).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
B=build/release
rounds=${1:-30}
out=${2:-$here/rounds.csv}
probe="$(mktemp)"
trap 'rm -f "$probe"' EXIT
g++ -O2 -std=c++20 -Wall -Wextra -pthread "$here/probe.cc" -o "$probe"
echo "round,measure,value" > "$out"
kf() {  # ROUND MEASURE NP [taskset CPUS]
  local r=$1 m=$2 np=$3; shift 3
  KUNGFU_BUSY_POLL=1 "$@" $B/apps/kfrun -np "$np" $B/apps/kfbench allreduce -b 8 -e 8 \
    -n 200000 -w 2000 2>&1 | grep -E '^\S*\s+[0-9]+ ' | grep -v '^\[kfrun\]' |
    awk -v r="$r" -v m="$m" '{print r "," m "," $11}' >> "$out"
}
for i in $(seq 1 "$rounds"); do
  "$probe" | awk -F, -v r="$i" '{print r ",clock_ns," $1; print r ",fp_step_ns," $2;
    print r ",chase_64k_ns," $3; print r ",chase_512k_ns," $4; print r ",chase_4m_ns," $5;
    print r ",shared_core_slowdown," $6}' >> "$out"
  $B/bench/shm_ring_pingpong --rounds 1 | awk -F, -v r="$i" '{print r ",crossing_us," $5}' >> "$out"
  kf "$i" kf_1worker_us 1
  kf "$i" kf_1worker_cpu0_us 1 taskset -c 0
  kf "$i" kf_2workers_us 2
  KUNGFU_SHM_RING=16K kf "$i" kf_2workers_ring16k_us 2
  mpirun --allow-run-as-root -np 2 --bind-to none --mca pml ob1 --mca btl vader,self \
    $B/bench/mpi_allreduce --sizes 8 --iters 30000 --warmup 1000 |
    grep '^mpi,' | awk -F, -v r="$i" '{print r ",mpi_2ranks_us," $6}' >> "$out"
  echo "round $i of $rounds done" >&2
done
