#!/bin/bash
# 4 workers on 2 cores, default mode, 128-512 KiB with 300 calls a size: the build before ($OLD)
# against the tree's, in pairs run in both orders (s4: old first; s4r: new first), as sweep.sh's
# short jobs had them slower in 4-5 of 6. $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-12}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    one s4 "$i" $build 4 -b 128K -e 512K -f 2 -n 300 -w 30
  done
  for build in new old; do
    one s4r "$i" $build 4 -b 128K -e 512K -f 2 -n 300 -w 30
  done
done
