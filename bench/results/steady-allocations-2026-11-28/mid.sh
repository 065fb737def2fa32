#!/bin/bash
# The same change at medium sizes, where a frame straight into the ring replaces the queued one:
# the build before ($OLD) against the tree's in back-to-back pairs. $1 pairs. Writes
# case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
B=build/release; pairs=${1:-10}; out=$2; old=${OLD:?set OLD to the kfbench built before the change}
echo "case,pair,build,bytes,p50_us" > "$out"
one() {  # CASE PAIR BUILD NP ARGS...
  local c=$1 i=$2 build=$3 np=$4; shift 4
  local bin=$PWD/$B/apps/kfbench; [ "$build" = old ] && bin=$old
  $B/apps/kfrun -np "$np" "$bin" allreduce "$@" 2>&1 | grep -E '^\S*\s+[0-9]+ ' |
    grep -v '^\[kfrun\]' | awk -v c="$c" -v i="$i" -v b="$build" '{print c "," i "," b "," $2 "," $11}' >> "$out"
}
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    one mid2 "$i" $build 2 -b 64K -e 1M -f 4 -n 300 -w 30
    one mid4 "$i" $build 4 -b 256K -e 256K -n 200 -w 20
  done
done
