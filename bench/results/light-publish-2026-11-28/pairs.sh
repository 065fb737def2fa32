#!/bin/bash
# A ring's publish without a locked instruction (an asymmetric fence, real/shm_ring.h): kfbench
# built before the change ($OLD, a kfbench binary) against the tree's, one size per job, in
# back-to-back pairs, so that this machine's slow and fast modes fall on both builds alike.
# $1 pairs per case. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
B=build/release; pairs=${1:-20}; out=$2; old=${OLD:?set OLD to the kfbench built before the change}
echo "case,pair,build,bytes,p50_us" > "$out"
one() {  # CASE PAIR BUILD NP ARGS... (env before kfrun comes from the caller)
  local c=$1 i=$2 build=$3 np=$4; shift 4
  local bin=$PWD/$B/apps/kfbench; [ "$build" = old ] && bin=$old
  $B/apps/kfrun -np "$np" "$bin" allreduce "$@" 2>&1 | grep -E '^\S*\s+[0-9]+ ' |
    grep -v '^\[kfrun\]' | awk -v c="$c" -v i="$i" -v b="$build" '{print c "," i "," b "," $2 "," $11}' >> "$out"
}
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    KUNGFU_BUSY_POLL=1 one busy2 "$i" $build 2 -b 8 -e 8 -n 30000 -w 1000
    one default2 "$i" $build 2 -b 8 -e 8 -n 20000 -w 500
    one default4 "$i" $build 4 -b 8 -e 8 -n 5000 -w 500
    one mid2 "$i" $build 2 -b 64K -e 1M -f 4 -n 300 -w 30
  done
done
