#!/bin/bash
# Through the shared-memory rings, payloads are lent only from the ring's size (every worker has a
# core) or half of it (workers share cores): kfbench built before the change ($OLD, a kfbench
# binary, lending from 64 KiB) against the tree's, one host, 2 and 4 ranks, 32 KiB to 8 MiB (AUTO),
# beside Open MPI (vader). $1 runs, the builds' order reversed every other run. Writes
# run,build,ranks,bytes,p50_us,busbw_gbs to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
B=build/release; runs=${1:-4}; out=$2; old=${OLD:?set OLD to the kfbench built before the change}
echo "run,build,ranks,bytes,p50_us,busbw_gbs" > "$out"
for run in $(seq 1 "$runs"); do
  order="old new"; [ $((run % 2)) = 0 ] && order="new old"
  for np in 2 4; do
    for build in $order; do
      bin=$PWD/$B/apps/kfbench; [ "$build" = old ] && bin=$old
      $B/apps/kfrun -np "$np" "$bin" allreduce -b 32K -e 8M -f 2 -n 300 -w 30 2>&1 |
        grep -E '^\S*\s+[0-9]+ ' | awk -v r="$run" -v b="$build" -v np="$np" \
          '{bw=$2/$11/1e3*2*(np-1)/np; printf "%s,%s,%s,%s,%s,%.3f\n", r, b, np, $2, $11, bw}' >> "$out"
    done
    y=(); [ "$np" -gt "$(nproc)" ] && y=(--mca mpi_yield_when_idle 1)
    mpirun --allow-run-as-root -np "$np" --bind-to none --oversubscribe --mca pml ob1 \
      --mca btl vader,self "${y[@]}" $B/bench/mpi_allreduce \
      --sizes 32K,64K,128K,256K,512K,1M,2M,4M,8M --iters 300 --warmup 30 2>/dev/null |
      grep '^mpi,' | awk -F, -v r="$run" -v np="$np" \
        '{bw=$4/$6/1e3*2*(np-1)/np; printf "%s,mpi,%s,%s,%s,%.3f\n", r, np, $4, $6, bw}' >> "$out"
  done
done
