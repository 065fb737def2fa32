#!/bin/bash
# The same change at medium sizes, where a frame straight into the ring replaces the queued one:
# the build before ($OLD) against the tree's in back-to-back pairs. $1 pairs. Writes
# case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-10}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    one mid2 "$i" $build 2 -b 64K -e 1M -f 4 -n 300 -w 30
    one mid4 "$i" $build 4 -b 256K -e 256K -n 200 -w 20
  done
done
