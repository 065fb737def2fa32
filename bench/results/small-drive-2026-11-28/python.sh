#!/bin/bash
# kungfu.allreduce from Python (bench/py_allreduce.py: numpy float32, in place, back to back) by
# default and with KUNGFU_CALLER_DRIVES=0 (the loop's thread does the work, as before), $1 runs
# alternated, at 2 and 4 ranks on this host. Writes run,mode,ranks,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
export PYTHONPATH=$PWD/build/release/python PATH=$PWD/build/release/apps:$PATH
runs=${1:-4}; out=$2
echo "run,mode,ranks,bytes,p50_us" > "$out"
for run in $(seq 1 "$runs"); do
  modes="default loop"; [ $((run % 2)) = 0 ] && modes="loop default"
  for np in 2 4; do
    for mode in $modes; do
      env=(); [ "$mode" = loop ] && env=(KUNGFU_CALLER_DRIVES=0)
      env "${env[@]}" kfrun -np "$np" /usr/bin/python3 bench/py_allreduce.py \
        --sizes 8,4096,65536,1048576 -n 500 -w 50 2>&1 | grep -o '{.*}' \
        | /usr/bin/python3 -c "
import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print(f\"$run,$mode,{d['ranks']},{d['bytes']},{d['p50_us']:.2f}\")" >> "$out"
    done
  done
done
