#!/bin/bash
# 16 cores, one host: AUTO's ring threshold per worker (32K/64K/128K) at 4 and 8 ranks, and
# Open MPI (the machine's own, shared memory) at 2, 4 and 8 ranks over the same sizes.
# (Measured with -auto-ring-part, which on that build set the one-host threshold too; the
# one-host threshold is -auto-local-ring-part now.)
source build/gpu_bundle/env.sh
export PATH=$PWD/build/gpu_bundle/apps:$PATH OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "run,system,part,ranks,bytes,p50_us,busbw_gbs" > $OUT/part16.csv
for r in 1 2 3; do
  for np in 2 4 8; do
    timeout 60 mpirun -np $np --bind-to none --mca pml ob1 --mca btl vader,self build/gpu_bundle/bench/mpi_allreduce \
      --sizes 8,32,128,512,2K,8K,32K,64K,128K,256K,512K,1M,2M,4M,8M,32M --iters 100 --warmup 5 2>>$OUT/mpi.err \
      | grep '^mpi,' | awk -F, -v r=$r -v np=$np '{printf "%s,mpi,,%s,%s,%s,%.3f\n", r, np, $4, $6, $4/$6/1e3*2*(np-1)/np}' >> $OUT/part16.csv
    [ $np = 2 ] && continue
    for part in 32K 64K 128K; do
      timeout 60 kfrun -np $np kfbench allreduce -b 64K -e 4M -f 2 -n 100 -w 5 -auto-local-ring-part $part 2>&1 \
        | grep -E '^\S*\s+[0-9]+ ' | awk -v r=$r -v p=$part -v np=$np '{printf "%s,kfbench,%s,%s,%s,%s,%.3f\n", r, p, np, $2, $11, $2/$11/1e3*2*(np-1)/np}' >> $OUT/part16.csv
    done
  done
done
wc -l $OUT/part16.csv; tail -3 $OUT/mpi.err
