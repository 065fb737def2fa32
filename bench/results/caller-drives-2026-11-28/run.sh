#!/bin/bash
# One host, issue 33's setting: kfbench (AUTO, frames through the shared-memory rings) with its
# blocking waits driving the worker's loop (KUNGFU_CALLER_DRIVES=1) and leaving it to the loop's
# thread (0), each in the default mode and busy polling (KUNGFU_BUSY_POLL=1), beside Open MPI
# through shared memory (vader). Unset, KUNGFU_CALLER_DRIVES is 1 at 2 ranks on this 2-core host
# and 0 at 4. The systems' order is reversed every other run. Writes
# run,system,ranks,bytes,p50_us,busbw_gbs to $1; $2 runs (default 4). PIN=1: each worker on one
# core (rank mod cores, pin.sh; Open MPI --bind-to core).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
export PATH=$PWD/build/release/apps:$PATH
out=$1; runs=${2:-4}
pin=(); bind=none
if [ "${PIN:-0}" = 1 ]; then pin=("$here/pin.sh"); bind=core:overload-allowed; fi
echo "run,system,ranks,bytes,p50_us,busbw_gbs" > $out
for run in $(seq 1 $runs); do
  for np in 2 4; do
    order="drives loop drives-busy loop-busy mpi"
    [ $((run % 2)) = 0 ] && order="mpi loop-busy drives-busy loop drives"
    for sys in $order; do
      case $sys in
        mpi)
          y=""; [ $np = 4 ] && y="--mca mpi_yield_when_idle 1"
          mpirun --allow-run-as-root -np $np --bind-to $bind --oversubscribe --mca pml ob1 --mca btl vader,self $y \
            build/release/bench/mpi_allreduce --sizes 8,64,512,4K,32K,256K,2M --iters 500 --warmup 50 2>/dev/null \
            | grep '^mpi,' | awk -F, -v r=$run -v np=$np '{b=$4; p=$6; bw=b/p/1e3*2*(np-1)/np; printf "%s,mpi,%s,%s,%s,%.3f\n", r, np, b, p, bw}' >> $out ;;
        *)
          drives=1; [[ $sys == loop* ]] && drives=0
          busy=0; [[ $sys == *-busy ]] && busy=1
          KUNGFU_CALLER_DRIVES=$drives KUNGFU_BUSY_POLL=$busy \
            kfrun -np $np "${pin[@]}" kfbench allreduce -b 8 -e 2M -f 8 -n 500 -w 50 2>&1 \
            | grep -E '^\S*\s+[0-9]+ ' | awk -v r=$run -v sy=$sys -v np=$np \
              '{b=$2; p=$11; bw=b/p/1e3*2*(np-1)/np; printf "%s,%s,%s,%s,%s,%.3f\n", r, sy, np, b, p, bw}' >> $out ;;
      esac
    done
  done
done
