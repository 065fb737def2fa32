#!/usr/bin/env bash
# How the exploration ran (README.md, "Looking for the rule"): kfbench at 4 ranks, 128 KiB to
# 2 MiB, under several settings in rotated order each round, Open MPI beside them.
#   explore.sh OUT ROUNDS   (from the repository root)
# KF_TMP_LEND was a temporary knob in a build of the tree (it set
# PeerOptions::transport.ring_lend_min_bytes for every payload) and is not in the tree: with
# today's build those two variants run as the default.
B=build/release
out=$1; rounds=$2
echo "round,variant,bytes,p50_us" > $out
run() { local r=$1 v=$2; shift 2
  env "$@" $B/apps/kfrun -np 4 $B/apps/kfbench allreduce -b 128K -e 2M -f 2 -n 200 -w 20 2>&1 | grep -E '^\S*\s+[0-9]+ ' | awk -v r=$r -v v=$v '{print r "," v "," $2 "," $11}' >> $out; }
vs=(default ring512 lend256 lend128 ring256 mpi)
for r in $(seq 1 $rounds); do
  for k in 0 1 2 3 4 5; do
    v=${vs[$(( (k + r) % 6 ))]}
    case $v in
      default) run $r $v X=1;;
      ring512) run $r $v KUNGFU_SHM_RING=512K;;
      ring256) run $r $v KUNGFU_SHM_RING=256K;;
      lend256) run $r $v KF_TMP_LEND=256K;;
      lend128) run $r $v KF_TMP_LEND=128K;;
      mpi) mpirun --allow-run-as-root -np 4 --oversubscribe --bind-to none --mca pml ob1 --mca btl vader,self $B/bench/mpi_allreduce --sizes 131072,262144,524288,1048576,2097152 --iters 200 --warmup 20 | grep '^mpi,' | awk -F, -v r=$r '{print r ",mpi," $4 "," $6}' >> $out;;
    esac
  done
done
