#!/bin/bash
# One case, default mode, the build before ($OLD) against the tree's in pairs run in both orders
# (CASE: old first; CASEr: new first), for sizes where short jobs disagreed.
# Usage: both-orders.sh PAIRS OUT CASE NP KFBENCH_ARGS... Writes case,pair,build,bytes,p50_us.
#   both-orders.sh 12 mid-sizes.csv s2 2 -b 64K -e 256K -f 2 -n 1000 -w 100
#   both-orders.sh 12 shared-mid.csv s4 4 -b 128K -e 512K -f 2 -n 300 -w 30
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "$1" "$2"
c=$3 np=$4
shift 4
for i in $(seq 1 "$pairs"); do
  for build in old new; do one "$c" "$i" $build "$np" "$@"; done
  for build in new old; do one "${c}r" "$i" $build "$np" "$@"; done
done
