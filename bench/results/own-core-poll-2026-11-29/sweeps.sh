#!/bin/bash
# 2 workers, 8 B to 1 MiB by 8x, 1,000 calls a size after 100: the build before ($OLD) and the
# tree's, their order swapped every other pair. $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-10}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  order="old new"; [ $((i % 2)) -eq 0 ] && order="new old"
  for build in $order; do
    one sweep2 "$i" $build 2 -b 8 -e 1M -f 8 -n 1000 -w 100
  done
done
