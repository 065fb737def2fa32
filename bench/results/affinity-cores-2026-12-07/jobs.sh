#!/bin/bash
# Short 2-worker jobs on one host, as ./kf bench peers runs small sizes (8 B to 32 KiB by 8x, 200
# calls a size after 20): the build before the change ($OLD, a kfbench binary) against the tree's,
# the order alternated from pair to pair. Case `free`: the scheduler places the workers; case
# `one_core`: the job confined to CPU 0 (taskset), where both workers always share a core.
# $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-30}" "${2:-}"
job() {  # PAIR BUILD
  one free "$1" "$2" 2 -b 8 -e 32K -f 8 -n 200 -w 20
  (taskset -pc 0 $BASHPID > /dev/null && one one_core "$1" "$2" 2 -b 8 -e 32K -f 8 -n 200 -w 20)
}
run_pairs job
