#!/bin/bash
# One host with dedicated cores: kfbench AUTO (ring from 128 KiB per worker) against STAR.
source build/gpu_bundle/env.sh
export PATH=$PWD/build/gpu_bundle/apps:$PATH
nproc > $OUT/nproc.txt; (which mpirun && mpirun --version) > $OUT/mpi.txt 2>&1
echo "run,strategy,ranks,bytes,p50_us,busbw_gbs" > $OUT/onehost16.csv
for r in 1 2 3; do
  for np in 2 4 8; do
    for s in AUTO STAR; do
      timeout 60 kfrun -np $np kfbench allreduce -b 8 -e 64M -f 4 -n 100 -w 5 -strategy $s 2>&1 \
        | grep -E '^\S*\s+[0-9]+ ' | awk -v r=$r -v s=$s -v np=$np '{printf "%s,%s,%s,%s,%s,%.3f\n", r, s, np, $2, $11, $2/$11/1e3*2*(np-1)/np}' >> $OUT/onehost16.csv
    done
  done
done
wc -l $OUT/onehost16.csv
