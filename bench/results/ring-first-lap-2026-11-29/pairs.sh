#!/bin/bash
# A ring's first lap: kfbench before the rings' pages were taken at set-up ($OLD, a kfbench
# binary) against the tree's, in back-to-back pairs, default mode, one case per job. Short runs
# (a few hundred calls, as ./kf bench peers makes at small sizes) show the first lap; the long
# one is the steady state. $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-8}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    one short2 "$i" $build 2 -b 4K -e 4K -n 300 -w 30
    one steady2 "$i" $build 2 -b 4K -e 4K -n 3000 -w 300
    one sweep4 "$i" $build 4 -b 256 -e 16K -f 2 -n 200 -w 20
    one short4 "$i" $build 4 -b 64K -e 64K -n 200 -w 20
  done
done
