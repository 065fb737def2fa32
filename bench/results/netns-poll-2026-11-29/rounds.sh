#!/bin/bash
# Between hosts (bench/peers.sh's 4 network namespaces, 10 Gbit/s tbf links), short jobs of
# small allreduces with the loop's poll after work at its default there (50us) and at the one-host
# value (200us), in alternated rounds (KUNGFU_POLL_BEFORE_SLEEP), and Open MPI's once per round.
# Usage: rounds.sh ROUNDS OUT [SIZES] [ITERS] [WARMUP] [RANKS] [POLL_A POLL_B] (default 50us
# 200us; "default" leaves KUNGFU_POLL_BEFORE_SLEEP unset). Writes
# round,system,poll,ranks,bytes,p50_us to OUT.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
rounds=$1 out=$2 sizes=${3:-8} iters=${4:-200} warmup=${5:-20} ranks=${6:-2,4}
a=${7:-50us} b=${8:-200us}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "round,system,poll,ranks,bytes,p50_us" > "$out"
run() {  # SYSTEM POLL
  local set=(KUNGFU_POLL_BEFORE_SLEEP="$2")
  [ "$2" = default ] && set=()
  env -u KUNGFU_POLL_BEFORE_SLEEP "${set[@]}" bench/peers.sh --worlds netns --sizes "$sizes" --ranks "$ranks" \
    --systems "$1" --iters "$iters" --warmup "$warmup" --out "$tmp/run" > "$tmp/log" 2>&1
  tail -n +2 "$tmp/run/peers.csv" |
    awk -F, -v r="$r" -v p="$2" '{print r "," $1 "," p "," $2 "," $4 "," $6}' >> "$out"
}
for r in $(seq 1 "$rounds"); do
  if ((r % 2)); then order="$a $b"; else order="$b $a"; fi
  for poll in $order; do run kfbench "$poll"; done
  run mpi -
done
