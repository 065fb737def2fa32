#!/usr/bin/env bash
# A quietly spinning driver reading the clock once in 8 idle turns instead of every turn
# (quiet_turns.diff, not kept: apply it to the tree and build before running this): the build
# before ($OLD, a kfbench binary) against the tree's, back to back, one case per job, the order
# alternated; Open MPI's 8 B at 2 ranks once per pair (which of the machine's modes the pair ran
# in).
#   OLD=/path/to/old/kfbench bench/results/busy-poll-slow-state-2026-12-07/quiet_turns_pairs.sh \
#     [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default quiet_turns_pairs.csv here):
# case,pair,build,bytes,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source bench/ab_pairs.sh "${1:-16}" "${2:-$here/quiet_turns_pairs.csv}"
cases() {  # PAIR BUILD
  local i=$1 b=$2
  KUNGFU_BUSY_POLL=1 one busy1 "$i" "$b" 1 -b 8 -e 8 -n 200000 -w 2000
  KUNGFU_BUSY_POLL=1 one busy2 "$i" "$b" 2 -b 8 -e 4K -f 512 -n 50000 -w 1000
  one default2 "$i" "$b" 2 -b 8 -e 4K -f 512 -n 20000 -w 1000
  KUNGFU_BUSY_POLL=1 one busy4 "$i" "$b" 4 -b 8 -e 8 -n 3000 -w 300
  one medium2 "$i" "$b" 2 -b 64K -e 1M -f 4 -n 300 -w 30
}
run_pairs cases
