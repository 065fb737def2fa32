#!/bin/bash
# 2 workers, default mode, 64-256 KiB with 1,000 calls a size: the build before ($OLD) against
# the tree's, in pairs run in both orders (s2: old first; s2r: new first), as sweep.sh's short
# jobs had 128 KiB slower in 6 of 6. $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-12}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    one s2 "$i" $build 2 -b 64K -e 256K -f 2 -n 1000 -w 100
  done
  for build in new old; do
    one s2r "$i" $build 2 -b 64K -e 256K -f 2 -n 1000 -w 100
  done
done
