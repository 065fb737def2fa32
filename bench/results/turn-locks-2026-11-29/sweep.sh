#!/bin/bash
# Larger sizes, default mode, 2 and 4 workers, the build before ($OLD) against the tree's in
# back-to-back pairs: no size should lose. $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-6}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    one sweep2 "$i" $build 2 -b 32K -e 4M -f 4 -n 200 -w 20
    one sweep4 "$i" $build 4 -b 32K -e 4M -f 4 -n 100 -w 10
  done
done
