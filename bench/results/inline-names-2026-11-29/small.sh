#!/bin/bash
# Only the 8-byte cases at 2 ranks (busy-polling and default), old and new alternated, in both
# orders (old first in odd pairs, new first in even ones). $1 pairs. Writes CSV to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-20}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  mpi8 "$i"
  order="old new"; [ $((i % 2)) = 0 ] && order="new old"
  for build in $order; do
    KUNGFU_BUSY_POLL=1 one busy2 "$i" $build 2 -b 8 -e 8 -n 30000 -w 1000
    one default2 "$i" $build 2 -b 8 -e 8 -n 10000 -w 1000
  done
done
