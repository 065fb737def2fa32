#!/usr/bin/env bash
# Large payloads read in place from the shared-memory ring (RingSlice), and ring parts lent from
# half the ring (a quarter past two workers a core), against the build before ($OLD, a kfbench
# binary), back to back, one case per job, the order alternated; Open MPI's allreduce at the same
# sizes once per pair, beside them.
#   OLD=/path/to/old/kfbench bench/results/ring-in-place-2026-12-07/pairs.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default pairs.csv here): case,pair,build,bytes,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source bench/ab_pairs.sh "${1:-10}" "${2:-$here/pairs.csv}"
mpi() {  # CASE PAIR NP SIZES
  mpirun --allow-run-as-root -np "$3" --oversubscribe --bind-to none --mca pml ob1 \
    --mca btl vader,self $B/bench/mpi_allreduce --sizes "$4" --iters 200 --warmup 20 |
    grep '^mpi,' | awk -F, -v c="$1" -v i="$2" '{print c "," i ",mpi," $4 "," $6}' >> "$out"
}
cases() {  # PAIR BUILD
  local i=$1 b=$2
  one medium4 "$i" "$b" 4 -b 64K -e 4M -f 2 -n 200 -w 20
  one medium2 "$i" "$b" 2 -b 64K -e 4M -f 2 -n 300 -w 30
  one crowded8 "$i" "$b" 8 -b 512K -e 2M -f 2 -n 60 -w 6
  if [ "$b" = new ]; then
    mpi medium4 "$i" 4 65536,131072,262144,524288,1048576,2097152,4194304
    mpi medium2 "$i" 2 65536,131072,262144,524288,1048576,2097152,4194304
  fi
}
run_pairs cases
