#!/bin/bash
# Short jobs, as ./kf bench peers runs small sizes: how often a 2-worker job on one host falls
# into the mode where every call wakes a sleeping peer, with the 50 us poll before sleeping
# ($OLD, a kfbench binary) and with the tree's (200 us where every worker has a core). Jobs
# alternate between the builds. $1 rounds. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-40}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    one short8 "$i" $build 2 -b 8 -e 8 -n 200 -w 20
  done
done
# Sizes beyond 8 B, longer jobs, and 4 workers on 2 cores (where the poll stays 50 us).
for i in $(seq 1 6); do
  for build in old new; do
    one sweep2 "$i" $build 2 -b 8 -e 1M -f 8 -n 1000 -w 100
    one sweep4 "$i" $build 4 -b 8 -e 1M -f 8 -n 200 -w 20
  done
done
