#!/bin/bash
# Python's blocking calls through kf::Peer's own blocking path (one call into the runtime per
# kungfu.allreduce of a numpy array) against the package built before ($OLD_PY, a copy of
# build/release/python), in back-to-back pairs, one rank count per job, so that this machine's
# slow and fast modes fall on both builds alike; kfbench (C++) once per pair beside them.
# bench/py_allreduce.py: numpy float32, in place, back to back. $1 pairs. Writes
# case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
B=build/release
pairs=${1:-10}
out=${2:?give the CSV to write}
old=${OLD_PY:?set OLD_PY to the Python package directory built before the change}
sizes=8,4096,65536,1048576
echo "case,pair,build,bytes,p50_us" > "$out"
py() {  # CASE PAIR BUILD NP
  local dir=$PWD/$B/python; [ "$3" = old ] && dir=$old
  PYTHONPATH=$dir $B/apps/kfrun -np "$4" /usr/bin/python3 bench/py_allreduce.py --sizes $sizes \
    -n "$5" -w 200 2>&1 | grep -o '{.*}' |
    /usr/bin/python3 -c 'import json, sys
for line in sys.stdin:
    d = json.loads(line)
    print("%s,%d,%.2f" % (sys.argv[1], d["bytes"], d["p50_us"]))' "$1,$2,$3" >> "$out"
}
cxx() {  # CASE PAIR NP: kfbench at the same sizes (8 B, then 4 KiB x 16 up to 1 MiB)
  for sweep in "-b 8 -e 8" "-b 4K -e 1M -f 16"; do
    # shellcheck disable=SC2086
    $B/apps/kfrun -np "$3" $B/apps/kfbench allreduce $sweep -n 2000 -w 200 2>&1 |
      grep -v '^\[kfrun\]' | grep -E '^\S*\s+[0-9]+ ' |
      awk -v c="$1" -v i="$2" '{print c "," i ",cxx," $2 "," $11}' >> "$out"
  done
}
for i in $(seq 1 "$pairs"); do
  for np in 2 4; do
    n=5000; [ "$np" = 4 ] && n=2000
    py "py$np" "$i" old "$np" "$n"
    py "py$np" "$i" new "$np" "$n"
    cxx "py$np" "$i" "$np"
  done
done
