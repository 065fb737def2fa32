#!/bin/bash
# A ring's publish without a locked instruction (an asymmetric fence, real/shm_ring.h): kfbench
# built before the change ($OLD, a kfbench binary) against the tree's, one size per job, in
# back-to-back pairs, so that this machine's slow and fast modes fall on both builds alike.
# $1 pairs per case. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-20}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    KUNGFU_BUSY_POLL=1 one busy2 "$i" $build 2 -b 8 -e 8 -n 30000 -w 1000
    one default2 "$i" $build 2 -b 8 -e 8 -n 20000 -w 500
    one default4 "$i" $build 4 -b 8 -e 8 -n 5000 -w 500
    one mid2 "$i" $build 2 -b 64K -e 1M -f 4 -n 300 -w 30
  done
done
