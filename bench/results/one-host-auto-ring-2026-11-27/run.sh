#!/bin/bash
# One host, issue 33's own setting: kfbench AUTO (now), kfbench STAR (AUTO before), Open MPI vader.
set -u
cd "$(dirname "$0")/../../.."
export PATH=$PWD/build/release/apps:$PATH
out=$1; echo "run,system,ranks,bytes,p50_us,busbw_gbs" > $out
for run in 1 2 3 4 5 6; do
  for np in 2 4; do
    order="auto star mpi"; [ $((run % 2)) = 0 ] && order="mpi star auto"
    for sys in $order; do
      case $sys in
        auto|star)
          s=AUTO; [ $sys = star ] && s=STAR
          kfrun -np $np kfbench allreduce -b 256K -e 64M -f 4 -n 100 -w 5 -strategy $s 2>&1 \
            | grep -E '^\S*\s+[0-9]+ ' | awk -v r=$run -v sy=$sys -v np=$np \
              '{b=$2; p=$11; bw=b/p/1e3*2*(np-1)/np; printf "%s,%s,%s,%s,%s,%.3f\n", r, sy, np, b, p, bw}' >> $out ;;
        mpi)
          y=""; [ $np = 4 ] && y="--mca mpi_yield_when_idle 1"
          mpirun --allow-run-as-root -np $np --bind-to none --oversubscribe --mca pml ob1 --mca btl vader,self $y \
            build/release/bench/mpi_allreduce --sizes 256K,1M,4M,16M,64M --iters 100 --warmup 5 2>/dev/null \
            | grep '^mpi,' | awk -F, -v r=$run -v np=$np '{b=$4; p=$6; bw=b/p/1e3*2*(np-1)/np; printf "%s,mpi,%s,%s,%s,%.3f\n", r, np, b, p, bw}' >> $out ;;
      esac
    done
  done
done
