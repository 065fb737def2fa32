#!/usr/bin/env bash
# Alternated rounds of 4 ranks between 4 network namespaces, beside Gloo and Open MPI.
# Usage: run.sh ROUNDS [FIRST] [SIZES]. Each round runs the variants of RUN_VARIANTS in order (odd
# rounds) or reversed (even rounds), each one bench/peers.sh invocation:
# "NAME STRATEGY SYSTEMS[;...]", by default AUTO (whose ring across hosts is RING_RS_AG_BIDIR)
# with Gloo and Open MPI, then RING_RS_AG alone. Appends to RUN_OUT/runs.csv
# (round,variant,system,ranks,bytes,p50_us,busbw_GBps; RUN_OUT defaults to this folder);
# peers.sh's output stays in RUN_OUT/runs/.
# first-split/ was RUN_OUT=first-split RUN_VARIANTS="bidir RING_RS_AG_BIDIR kfbench,gloo,mpi;ring
# RING_RS_AG kfbench;auto AUTO kfbench" run.sh 4 1 4M,8M,16M,64M, on an earlier build.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
rounds=${1:-4} first=${2:-1} sizes=${3:-8M,16M,64M}
out="$here/${RUN_OUT:-.}"
IFS=';' read -r -a variants <<<"${RUN_VARIANTS:-auto AUTO kfbench,gloo,mpi;ring RING_RS_AG kfbench}"
export KF_PEERS_RUN_TIMEOUT=${KF_PEERS_RUN_TIMEOUT:-150}
csv="$out/runs.csv"
mkdir -p "$out/runs"
[[ -f "$csv" ]] || echo "round,variant,system,ranks,bytes,p50_us,busbw_GBps" >"$csv"
one() {  # ROUND VARIANT STRATEGY SYSTEMS
  local dir="$out/runs/r$1-$2"
  "$repo/bench/peers.sh" --worlds netns --ranks 4 --sizes "$sizes" --systems "$4" \
    --kf-strategy "$3" --iters 20 --warmup 3 --out "$dir" >"$dir.log" 2>&1 || true
  tail -n +2 "$dir/peers.csv" | awk -F, -v r="$1" -v v="$2" \
    '$6 != "" {print r "," v "," $1 "," $2 "," $4 "," $6 "," $9}' >>"$csv"
}
for ((r = first; r < first + rounds; ++r)); do
  order=("${variants[@]}")
  if ((r % 2 == 0)); then
    order=()
    for ((i = ${#variants[@]} - 1; i >= 0; --i)); do order+=("${variants[i]}"); done
  fi
  for v in "${order[@]}"; do
    read -r name strategy systems <<<"$v"
    one "$r" "$name" "$strategy" "$systems"
    echo "round $r $name: $(grep "^$r,$name,kfbench" "$csv" | cut -d, -f5,6 | tr '\n' ' ')" >&2
  done
done
