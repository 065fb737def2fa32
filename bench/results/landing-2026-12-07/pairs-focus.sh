#!/usr/bin/env bash
# A second look at the two cases where pairs.sh's run had the tree's build in a slow mode more
# often than the build before: 256 KiB on one host and 8 B over TCP between pseudo-hosts, alone,
# in 16 pairs ($OLD, a kfbench binary at b8c23d0, against the tree's).
#   OLD=/path/to/old/kfbench bench/results/landing-2026-12-07/pairs-focus.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default pairs-focus.csv here).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source bench/ab_pairs.sh "${1:-16}" "${2:-$here/pairs-focus.csv}"
cases() {  # PAIR BUILD
  local i=$1 b=$2
  one medium2 "$i" "$b" 2 -b 256K -e 256K -n 1000 -w 30
  tcp tcp2 "$i" "$b" -b 8 -e 8 -n 5000 -w 500
}
run_pairs cases
