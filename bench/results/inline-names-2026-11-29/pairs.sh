#!/bin/bash
# A message's name and small payload held inline (the tree's kfbench) against the build before
# ($OLD), in back-to-back pairs, one case per job. kfbench runs under the automatic names
# ("kf.allreduce.N"), which std::string did not hold inline. Busy polling at 1 worker and at 2,
# the default mode at 2 and 4 workers, and medium sizes at 2 (where only the name's copy changes).
# Open MPI's 8 B at 2 ranks once per pair says which of the machine's modes the pair ran in.
# $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-10}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  mpi8 "$i"
  for build in old new; do
    KUNGFU_BUSY_POLL=1 one busy1 "$i" $build 1 -b 8 -e 8 -n 30000 -w 1000
    KUNGFU_BUSY_POLL=1 one busy2 "$i" $build 2 -b 8 -e 4K -f 512 -n 30000 -w 1000
    one default2 "$i" $build 2 -b 8 -e 8 -n 10000 -w 1000
    one default4 "$i" $build 4 -b 8 -e 8 -n 3000 -w 300
    one mid2 "$i" $build 2 -b 64K -e 1M -f 4 -n 2000 -w 200
  done
done
