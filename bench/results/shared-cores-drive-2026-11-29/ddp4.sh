#!/usr/bin/env bash
# DDP (bench/torch_ddp.py, MLP, 20 steps) at 4 ranks on 2 cores, the package before (OLD_PY) and
# the tree's (build/release/python), in back-to-back pairs, order alternated.
#   OLD_PY=... bench/results/shared-cores-drive-2026-11-29/ddp4.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT: pair,build,samples_per_s.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
old=${OLD_PY:?set OLD_PY to the package directory built before the change}
pairs=${1:-4}
out=${2:-$here/ddp4.csv}
echo "pair,build,samples_per_s" > "$out"
one() {  # PAIR BUILD PACKAGE
  PYTHONPATH=$3 timeout 600 build/release/apps/kfrun -q -np 4 /usr/bin/python3 \
    bench/torch_ddp.py kungfu --model mlp --steps 20 | sed -n 's/^.*stdout\] {/{/p' |
    /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.readline()); print(sys.argv[1], sys.argv[2], round(r["samples_per_s"], 2), sep=",")' "$1" "$2" >> "$out"
}
for i in $(seq 1 "$pairs"); do
  if (( i % 2 )); then one "$i" old "$old"; one "$i" new "$PWD/build/release/python"
  else one "$i" new "$PWD/build/release/python"; one "$i" old "$old"; fi
done
