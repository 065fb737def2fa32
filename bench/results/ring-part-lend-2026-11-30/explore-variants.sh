#!/usr/bin/env bash
# The first exploration (README.md, explore-4ranks-variants.csv): kfbench at 4 ranks, 512 KiB and
# 1 MiB, by default, with a 512 KiB shared-memory ring ("lend": it lends from half the ring) and
# with smaller chunks, and Open MPI, in rotated order each round.
#   explore-variants.sh OUT ROUNDS   (from the repository root)
B=build/release
out=$1; rounds=$2
echo "round,variant,bytes,p50_us" > $out
run() { local r=$1 v=$2; shift 2
  env "$@" $B/apps/kfrun -np 4 $B/apps/kfbench allreduce -b 512K -e 1M -f 2 -n 200 -w 20 $KFARGS 2>&1 | grep -E '^\S*\s+[0-9]+ ' | awk -v r=$r -v v=$v '{print r "," v "," $2 "," $11}' >> $out; }
vs=(default lend chunk128 chunk64 mpi)
for r in $(seq 1 $rounds); do
  for k in 0 1 2 3 4; do
    v=${vs[$(( (k + r) % 5 ))]}
    case $v in
      default) KFARGS="" run $r $v X=1;;
      lend) KFARGS="" run $r $v KUNGFU_SHM_RING=512K;;
      chunk128) KFARGS="-chunk 128K" run $r $v X=1;;
      chunk64) KFARGS="-chunk 64K" run $r $v X=1;;
      mpi) mpirun --allow-run-as-root -np 4 --oversubscribe --bind-to none --mca pml ob1 --mca btl vader,self $B/bench/mpi_allreduce --sizes 524288,1048576 --iters 200 --warmup 20 | grep '^mpi,' | awk -F, -v r=$r '{print r ",mpi," $4 "," $6}' >> $out;;
    esac
  done
done
