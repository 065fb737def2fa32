#!/usr/bin/env bash
# The Python package before (OLD_PY: its built package directory, the one holding kungfu/) and
# after this change (the tree's build/release/python), in back-to-back pairs, one job per build
# and rank count, small_calls.py at 8 bytes; gloo once per pair beside them.
#   OLD_PY=/path/to/old/python bench/results/torch-waits-2026-11-28/pairs.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default pairs.csv here): ranks,pair,build,call,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pairs=${1:-8}
out=${2:-$here/pairs.csv}
old=${OLD_PY:?set OLD_PY to the package directory built before the change}
new=$PWD/build/release/python
kfrun=$PWD/build/release/apps/kfrun
echo "ranks,pair,build,call,p50_us" > "$out"
one() {  # NP PAIR BUILD PACKAGE BACKEND
  PYTHONPATH=$4 timeout 600 "$kfrun" -q -np "$1" /usr/bin/python3 "$here/small_calls.py" "$5" |
    sed -n 's/^.*stdout\] {/{/p' | /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.readline())
for k, v in r.items():
    if k not in ("backend", "ranks", "bytes"):
        print(r["ranks"], sys.argv[1], sys.argv[2], k, v, sep=",")' "$2" "$3" >> "$out"
}
for i in $(seq 1 "$pairs"); do
  for np in 2 4; do
    if (( i % 2 )); then one $np $i old "$old" kungfu; one $np $i new "$new" kungfu
    else one $np $i new "$new" kungfu; one $np $i old "$old" kungfu; fi
    one $np $i gloo "$new" gloo
  done
  echo "pair $i of $pairs done" >&2
done
