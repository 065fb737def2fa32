#!/usr/bin/env bash
# DDP training throughput (bench/torch_ddp.py, MLP, backend kungfu) with the package before
# (OLD_PY) and after this change, in back-to-back pairs at 2 and 4 ranks: the change must not slow
# DDP, whose buckets start on the loop's thread as before (they are larger than 64 KiB).
#   OLD_PY=/path/to/old/python bench/results/torch-waits-2026-11-28/ddp_pairs.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default ddp.csv here): ranks,pair,build,samples_per_s.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pairs=${1:-3}
out=${2:-$here/ddp.csv}
old=${OLD_PY:?set OLD_PY to the package directory built before the change}
new=$PWD/build/release/python
echo "ranks,pair,build,samples_per_s" > "$out"
one() {  # NP PAIR BUILD PACKAGE
  PYTHONPATH=$4 timeout 600 "$PWD/build/release/apps/kfrun" -q -np "$1" /usr/bin/python3 \
    "$PWD/bench/torch_ddp.py" kungfu --model mlp --steps 20 |
    sed -n 's/^.*stdout\] {/{/p' | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.readline())
print(r["ranks"], sys.argv[1], sys.argv[2], round(r["samples_per_s"], 2), sep=",")' "$2" "$3" >> "$out"
}
for i in $(seq 1 "$pairs"); do
  for np in 2 4; do
    if (( i % 2 )); then one $np $i old "$old"; one $np $i new "$new"
    else one $np $i new "$new"; one $np $i old "$old"; fi
  done
  echo "pair $i of $pairs done" >&2
done
