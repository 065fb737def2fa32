#!/usr/bin/env bash
# Automatic names without fmt (Peer::next_name): the build before ($OLD, a kfbench binary)
# against the tree's, back to back, one case per job; Open MPI's 8 B at 2 ranks once per pair.
#   OLD=/path/to/old/kfbench bench/results/auto-names-2026-11-30/pairs.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default pairs.csv here): case,pair,build,bytes,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source bench/ab_pairs.sh "${1:-10}" "${2:-$here/pairs.csv}"
for i in $(seq 1 "$pairs"); do
  for b in old new; do
    [ $((i % 2)) = 0 ] && b=$([ "$b" = old ] && echo new || echo old)
    KUNGFU_BUSY_POLL=1 one busy1 "$i" "$b" 1 -b 8 -e 8 -n 200000 -w 2000
    KUNGFU_BUSY_POLL=1 one busy2 "$i" "$b" 2 -b 8 -e 4K -f 512 -n 50000 -w 1000
    one default2 "$i" "$b" 2 -b 8 -e 8 -n 20000 -w 1000
  done
  mpi8 "$i"
  echo "pair $i of $pairs done" >&2
done
