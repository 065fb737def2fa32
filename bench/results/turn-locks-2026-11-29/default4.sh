#!/bin/bash
# 4 workers on 2 cores, default mode, 8 B and 4 KiB, the build before ($OLD) against the tree's
# in back-to-back pairs: the case that pairs.sh found bimodal (26-30 us or 44-63 us per job). $1
# pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-20}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    one default4 "$i" $build 4 -b 8 -e 4K -f 512 -n 3000 -w 300
  done
done
