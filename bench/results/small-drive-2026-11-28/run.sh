#!/bin/bash
# One host, 4 ranks on this 2-core host (the workers outnumber the cores): kfbench (AUTO, frames
# through the shared-memory rings) in its default mode (KUNGFU_CALLER_DRIVES unset: the caller
# drives blocking calls of at most 64 KiB), with every wait driving (1) and with none (0, the
# default before), the default busy polling (KUNGFU_BUSY_POLL=1), beside Open MPI through shared
# memory (vader, yielding when idle where the ranks outnumber the cores). The
# systems' order is reversed every other run. Writes run,system,ranks,bytes,p50_us,busbw_gbs to
# $1; $2 runs (default 4); NP ranks (default 4).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
export PATH=$PWD/build/release/apps:$PATH
out=$1; runs=${2:-4}; np=${NP:-4}
echo "run,system,ranks,bytes,p50_us,busbw_gbs" > "$out"
for run in $(seq 1 "$runs"); do
  order="default loop drives busy mpi"
  [ $((run % 2)) = 0 ] && order="mpi busy drives loop default"
  for sys in $order; do
    case $sys in
      mpi)
        y=(); [ "$np" -gt "$(nproc)" ] && y=(--mca mpi_yield_when_idle 1)
        mpirun --allow-run-as-root -np "$np" --bind-to none --oversubscribe --mca pml ob1 \
          --mca btl vader,self "${y[@]}" \
          build/release/bench/mpi_allreduce --sizes 8,64,512,4K,32K,256K,2M --iters 500 --warmup 50 \
          2>/dev/null | grep '^mpi,' | awk -F, -v r="$run" -v np="$np" \
          '{b=$4; p=$6; bw=b/p/1e3*2*(np-1)/np; printf "%s,mpi,%s,%s,%s,%.3f\n", r, np, b, p, bw}' >> "$out" ;;
      *)
        env=(); [ "$sys" = loop ] && env=(KUNGFU_CALLER_DRIVES=0)
        [ "$sys" = drives ] && env=(KUNGFU_CALLER_DRIVES=1)
        [ "$sys" = busy ] && env=(KUNGFU_BUSY_POLL=1)
        env "${env[@]}" kfrun -np "$np" kfbench allreduce -b 8 -e 2M -f 8 -n 500 -w 50 2>&1 \
          | grep -E '^\S*\s+[0-9]+ ' | awk -v r="$run" -v sy="$sys" -v np="$np" \
            '{b=$2; p=$11; bw=b/p/1e3*2*(np-1)/np; printf "%s,%s,%s,%s,%s,%.3f\n", r, sy, np, b, p, bw}' >> "$out" ;;
    esac
  done
done
