#!/usr/bin/env bash
# Rounds of the namespace world's TCP ceiling (ceiling.sh, one round) and, right after, the three
# systems' allreduce there (bench/peers.sh --worlds netns at 2 and 4 ranks), then kfbench at 4
# ranks once more with its workers sleeping as soon as they are idle (KUNGFU_POLL_BEFORE_SLEEP=0us,
# system "kfbench_nopoll": four emulated hosts share the 2 cores, where a worker that polls takes
# a core from the kernel's network work). Run as root from the repository root after a release
# build:
#   bench/results/netns-ceiling-2026-12-07/rounds.sh [ROUNDS] [SIZES]
# Writes here/ceiling.csv and here/systems.csv (round,system,ranks,bytes,busbw); a failed run's
# rows are left out and its reason printed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=${1:-5}
sizes=${2:-4M,16M,64M}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -f "$here/ceiling.csv"
echo "round,system,ranks,bytes,busbw" >"$here/systems.csv"

peers() {  # ROUND SYSTEM_NAME PEERS_ARGS...
  local r=$1 name=$2
  shift 2
  KF_PEERS_RUN_TIMEOUT=120 bench/peers.sh build/release --worlds netns --sizes "$sizes" \
    --out "$tmp/run" "$@" >"$tmp/log" 2>&1 || true
  [[ -f "$tmp/run/peers.csv" ]] || { echo "round $r: no peers.csv"; tail -5 "$tmp/log"; return; } >&2
  tail -n +2 "$tmp/run/peers.csv" | awk -F, -v r="$r" -v name="$name" '
    $6 == "" { print "round " r ": " $0 > "/dev/stderr"; next }
    { print r "," (name == "" ? $1 : name) "," $2 "," $4 "," $9 }' >>"$here/systems.csv"
  rm -rf "$tmp/run"
}

for r in $(seq 1 "$rounds"); do
  "$here/ceiling.sh" 1 4 "$here/ceiling.csv" "$r"
  echo "rounds: round $r, the systems" >&2
  peers "$r" "" --ranks 2,4
  KUNGFU_POLL_BEFORE_SLEEP=0us peers "$r" kfbench_nopoll --ranks 4 --systems kfbench
done
