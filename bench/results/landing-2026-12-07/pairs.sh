#!/usr/bin/env bash
# Receives posted by operations: the build before them ($OLD, a kfbench binary at b8c23d0)
# against the tree's, back to back, one case per job, the order alternated; Open MPI's 8 B at 2
# ranks once per pair (which of the machine's modes the pair ran in). The small cases look for a
# cost on the short path (a lander asked of nothing below 64 KiB); the medium ones on one host go
# through the shared-memory ring, the tcp ones between two loopback pseudo-hosts.
#   OLD=/path/to/old/kfbench bench/results/landing-2026-12-07/pairs.sh [PAIRS] [OUT]
# Run from the repository root. Writes OUT (default pairs.csv here): case,pair,build,bytes,p50_us.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source bench/ab_pairs.sh "${1:-8}" "${2:-$here/pairs.csv}"
cases() {  # PAIR BUILD
  local i=$1 b=$2
  KUNGFU_BUSY_POLL=1 one busy2 "$i" "$b" 2 -b 8 -e 8 -n 50000 -w 1000
  one default2 "$i" "$b" 2 -b 8 -e 8 -n 20000 -w 1000
  one medium2 "$i" "$b" 2 -b 256K -e 2M -f 2 -n 300 -w 30
  tcp tcp2 "$i" "$b" -b 8 -e 8 -n 5000 -w 500
  tcp tcp2m "$i" "$b" -b 256K -e 4M -f 4 -n 200 -w 20
}
run_pairs cases
