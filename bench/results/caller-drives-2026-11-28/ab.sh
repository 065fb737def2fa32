#!/bin/bash
# 8-byte allreduce, AUTO, rings, the caller driving the loop (KUNGFU_CALLER_DRIVES=1) or not (0),
# alternated run by run, pinned (each worker on one core) and not: the p50 and, from `perf
# stat`, system calls and context switches per allreduce per rank (a run of 20,200 operations
# less one of 200, so start-up and shut-down cancel). Writes CSV to $1; $2 runs.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
export PATH=$PWD/build/release/apps:$PATH
out=$1; runs=${2:-6}
echo "run,pinned,ranks,drives,p50_us,syscalls_per_op,switches_per_op" > $out
one() {  # pinned ranks drives n -> "p50 syscalls switches"
  local pin=(); [ $1 = 1 ] && pin=("$here/pin.sh")
  KUNGFU_CALLER_DRIVES=$3 perf stat -x, -e raw_syscalls:sys_enter,context-switches -o /tmp/ab.perf -- \
    kfrun -np $2 "${pin[@]}" kfbench allreduce -b 8 -e 8 -n $4 -w 0 2>&1 \
    | grep -E '^\S*\s+[0-9]+ ' | awk '{printf "%s ", $11}'
  awk -F, '/raw_syscalls/{s=$1} /context-switches/{c=$1} END{printf "%s %s\n", s, c}' /tmp/ab.perf
}
for run in $(seq 1 $runs); do
  for pinned in 1 0; do
    for np in 2 4; do
      order="1 0"; [ $((run % 2)) = 0 ] && order="0 1"
      for drives in $order; do
        read -r p50 s1 c1 <<< "$(one $pinned $np $drives 20200)"
        read -r _ s0 c0 <<< "$(one $pinned $np $drives 200)"
        awk -v r=$run -v pi=$pinned -v np=$np -v d=$drives -v p=$p50 -v s1=$s1 -v s0=$s0 -v c1=$c1 -v c0=$c0 \
          'BEGIN{printf "%s,%s,%s,%s,%s,%.2f,%.2f\n", r, pi, np, d, p, (s1-s0)/20000/np, (c1-c0)/20000/np}' >> $out
      done
    done
  done
done
