#!/usr/bin/env bash
# A collective's deadline timer set and cancelled in TimerQueue's short array of recent timers, a
# frame whole in the bytes read decoded without the decoder's states, and the driver's turn
# reading lent to the operation's deadline: the build before ($OLD, a kfbench binary) against the
# tree's, back to back, one case per job, the order alternated; Open MPI's 8 B at 2 ranks once per
# pair (which of the machine's modes the pair ran in).
#   OLD=/path/to/old/kfbench bench/results/small-path-2026-12-07/pairs.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default pairs.csv here): case,pair,build,bytes,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source bench/ab_pairs.sh "${1:-16}" "${2:-$here/pairs.csv}"
cases() {  # PAIR BUILD
  local i=$1 b=$2
  KUNGFU_BUSY_POLL=1 one busy1 "$i" "$b" 1 -b 8 -e 8 -n 200000 -w 2000
  KUNGFU_BUSY_POLL=1 one busy2 "$i" "$b" 2 -b 8 -e 4K -f 512 -n 50000 -w 1000
  one default2 "$i" "$b" 2 -b 8 -e 4K -f 512 -n 20000 -w 1000
  one default4 "$i" "$b" 4 -b 8 -e 4K -f 512 -n 3000 -w 300
  KUNGFU_BUSY_POLL=1 one busy4 "$i" "$b" 4 -b 8 -e 8 -n 3000 -w 300
  one medium2 "$i" "$b" 2 -b 64K -e 1M -f 4 -n 300 -w 30
  tcp tcp2 "$i" "$b" -b 8 -e 4K -f 512 -n 5000 -w 500
}
run_pairs cases
