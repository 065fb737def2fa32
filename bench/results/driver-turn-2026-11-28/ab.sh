#!/bin/bash
# A driver's turn reads the clock once and allocates nothing: kfbench built before the change
# ($OLD, a kfbench binary) against the tree's, one host, 2 ranks in the default mode and busy
# polling and 4 ranks in the default mode, 8 B to 32 KiB, beside Open MPI (vader). $1 runs, the
# builds' order reversed every other run. Writes run,build,mode,ranks,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
B=build/release; runs=${1:-6}; out=$2; old=${OLD:?set OLD to the kfbench built before the change}
echo "run,build,mode,ranks,bytes,p50_us" > "$out"
kf() {  # BINARY NP ENV...
  local bin=$1 np=$2; shift 2
  env "$@" $B/apps/kfrun -np "$np" "$bin" allreduce -b 8 -e 32K -f 8 -n 20000 -w 500 2>&1 |
    grep -E '^\S*\s+[0-9]+ ' | awk '{print $2 "," $11}'
}
for run in $(seq 1 "$runs"); do
  order="old new"; [ $((run % 2)) = 0 ] && order="new old"
  for build in $order; do
    bin=$PWD/$B/apps/kfbench; [ "$build" = old ] && bin=$old
    kf "$bin" 2 KUNGFU_BUSY_POLL=0 | sed "s/^/$run,$build,default,2,/" >> "$out"
    kf "$bin" 2 KUNGFU_BUSY_POLL=1 | sed "s/^/$run,$build,busy,2,/" >> "$out"
    kf "$bin" 4 KUNGFU_BUSY_POLL=0 | sed "s/^/$run,$build,default,4,/" >> "$out"
  done
  for np in 2 4; do
    y=(); [ "$np" -gt "$(nproc)" ] && y=(--mca mpi_yield_when_idle 1)
    mpirun --allow-run-as-root -np "$np" --bind-to none --oversubscribe --mca pml ob1 \
      --mca btl vader,self "${y[@]}" $B/bench/mpi_allreduce --sizes 8,64,512,4K,32K \
      --iters 20000 --warmup 500 2>/dev/null | grep '^mpi,' |
      awk -F, -v r="$run" -v np="$np" '{print r ",mpi,mpi," np "," $4 "," $6}' >> "$out"
  done
done
