#!/usr/bin/env bash
# One TCP connection per pair carrying both directions (KUNGFU_TCP_DUPLEX=1, the default) against
# one per direction (KUNGFU_TCP_DUPLEX=0), alternated, between network namespaces: each round is
# one bench/peers.sh invocation with kfbench (duplex), Open MPI and Gloo, then one with kfbench
# alone, duplex off. Run from the repository root as root.
#   bench/results/tcp-duplex-2026-11-29/run.sh ROUNDS RANKS SIZES [PEERS [FIRST]]
# PEERS: the other systems beside duplex kfbench (default mpi,gloo); FIRST: the first round's
# number (default 1), so that a later invocation does not overwrite an earlier one's runs.
# Writes runs/RANKS-{duplex,split}-ROUND/ (peers.sh's output) here and appends to runs.csv:
# round,variant,system,ranks,bytes,p50_us,busbw_GBps.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=$1 ranks=$2 sizes=$3 peers=${4:-mpi,gloo} first=${5:-1}
[[ -f "$here/runs.csv" ]] || echo "round,variant,system,ranks,bytes,p50_us,busbw_GBps" >"$here/runs.csv"
for r in $(seq "$first" $((first + rounds - 1))); do
  for v in duplex split; do
    out="$here/runs/$ranks-$v-$r"
    systems=kfbench
    [[ $v == split ]] || systems="kfbench,$peers"
    duplex=1
    [[ $v == duplex ]] || duplex=0
    KUNGFU_TCP_DUPLEX=$duplex KF_PEERS_RUN_TIMEOUT=150 bench/peers.sh --worlds netns \
      --ranks "$ranks" --sizes "$sizes" --systems "$systems" --iters 20 --warmup 3 --out "$out" \
      >"$out.log" 2>&1 || echo "run $v $r failed" >&2
    grep -v '^system' "$out/peers.csv" | awk -F, -v r="$r" -v v="$v" \
      '{print r "," v "," $1 "," $2 "," $4 "," $6 "," $9}' >>"$here/runs.csv"
    echo "round $r $v done" >&2
  done
done
