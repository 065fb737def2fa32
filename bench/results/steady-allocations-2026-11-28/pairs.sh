#!/bin/bash
# Fewer allocations per collective (kept timer, operation and mailbox nodes, a ring's frame
# written straight in, a reused receive round): kfbench built before the change ($OLD, a kfbench
# binary) against the tree's, one case per job, in back-to-back pairs, so that this machine's slow
# and fast modes fall on both builds alike; Open MPI's 8 B at 2 ranks once per pair says which
# mode the pair ran in. $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-20}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  mpi8 "$i"
  for build in old new; do
    KUNGFU_BUSY_POLL=1 one busy2 "$i" $build 2 -b 8 -e 8 -n 30000 -w 1000
    KUNGFU_BUSY_POLL=1 one busy4 "$i" $build 4 -b 8 -e 8 -n 3000 -w 300
    one default2 "$i" $build 2 -b 8 -e 8 -n 20000 -w 500
    one default4 "$i" $build 4 -b 8 -e 8 -n 5000 -w 500
  done
done
