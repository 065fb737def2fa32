#!/bin/bash
# jobs.sh's sweeps again with the tree's build first in each pair, against an order bias.
# $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-6}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in new old; do
    one sweep2 "$i" $build 2 -b 8 -e 1M -f 8 -n 1000 -w 100
    one short8 "$i" $build 2 -b 8 -e 8 -n 200 -w 20
  done
done
