#!/bin/bash
# 4 ranks on this host's 2 cores, 32 KiB to 4 MiB: AUTO against each strategy it could choose
# (RING_RS_AG, BINARY_TREE_STAR, HALVING_DOUBLING), beside Open MPI (vader, yielding when idle).
# $1 runs, the strategies' order rotated each run. Writes run,system,ranks,bytes,p50_us,busbw_gbs
# to $2. KFBENCH (default: the tree's) picks the kfbench binary.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
B=build/release; runs=${1:-6}; out=$2; np=${NP:-4}
bin=${KFBENCH:-$PWD/$B/apps/kfbench}
echo "run,system,ranks,bytes,p50_us,busbw_gbs" > "$out"
strategies=(AUTO RING_RS_AG BINARY_TREE_STAR HALVING_DOUBLING)
for run in $(seq 1 "$runs"); do
  k=$(( (run - 1) % ${#strategies[@]} ))
  order=("${strategies[@]:k}" "${strategies[@]:0:k}")
  for s in "${order[@]}"; do
    log=$(mktemp)
    if ! $B/apps/kfrun -np "$np" "$bin" allreduce -b 32K -e 4M -f 2 -n 300 -w 30 --strategy "$s" \
      > "$log" 2>&1; then
      echo "run $run, $s failed: its output is in $out.failed-$run-$s.log" >&2
      cp "$log" "$out.failed-$run-$s.log"
    fi
    grep -E '^\S*\s+[0-9]+ ' "$log" | grep -v '^\[kfrun\]' | awk -v r="$run" -v s="$s" -v np="$np" \
        '{bw=$2/$11/1e3*2*(np-1)/np; printf "%s,%s,%s,%s,%s,%.3f\n", r, s, np, $2, $11, bw}' >> "$out"
    rm -f "$log"
  done
  y=(); [ "$np" -gt "$(nproc)" ] && y=(--mca mpi_yield_when_idle 1)
  mpirun --allow-run-as-root -np "$np" --bind-to none --oversubscribe --mca pml ob1 \
    --mca btl vader,self "${y[@]}" $B/bench/mpi_allreduce \
    --sizes 32K,64K,128K,256K,512K,1M,2M,4M --iters 300 --warmup 30 2>/dev/null |
    grep '^mpi,' | awk -F, -v r="$run" -v np="$np" \
      '{bw=$4/$6/1e3*2*(np-1)/np; printf "%s,mpi,%s,%s,%s,%.3f\n", r, np, $4, $6, bw}' >> "$out"
done
