#!/usr/bin/env bash
# A ring's parts lent from an eighth of the ring where the host has two workers a core or more:
# kfbench built before ($OLD) against the tree's, back to back, one case per job, the order
# alternated; Open MPI's shared memory once per pair beside them (3, 4 and 8 ranks on 2 cores).
#   OLD=/path/to/old/kfbench bench/results/ring-part-lend-2026-11-30/pairs.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default pairs.csv here): case,pair,build,bytes,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source bench/ab_pairs.sh "${1:-20}" "${2:-$here/pairs.csv}"
mpi() {  # CASE PAIR NP SIZES
  mpirun --allow-run-as-root -np "$3" --oversubscribe --bind-to none --mca pml ob1 \
    --mca btl vader,self $B/bench/mpi_allreduce --iters 100 --warmup 10 --sizes "$4" |
    grep '^mpi,' | awk -F, -v c="$1" -v i="$2" '{print c "," i ",mpi," $4 "," $6}' >> "$out"
}
both() {  # CASE PAIR NP ARGS...
  local c=$1 i=$2 np=$3; shift 3
  if (( i % 2 )); then one "$c" "$i" old "$np" "$@"; one "$c" "$i" new "$np" "$@"
  else one "$c" "$i" new "$np" "$@"; one "$c" "$i" old "$np" "$@"; fi
}
for i in $(seq 1 "$pairs"); do
  both np4 "$i" 4 -b 128K -e 4M -f 2 -n 100 -w 10
  mpi np4 "$i" 4 131072,262144,524288,1048576,2097152,4194304
  both np8 "$i" 8 -b 256K -e 4M -f 2 -n 50 -w 5
  mpi np8 "$i" 8 262144,524288,1048576,2097152,4194304
  both np3 "$i" 3 -b 1M -e 2M -f 2 -n 100 -w 10
  echo "pair $i of $pairs done" >&2
done
