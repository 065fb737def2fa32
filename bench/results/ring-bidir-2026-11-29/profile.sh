#!/usr/bin/env bash
# Where the CPU goes in a 4-rank allreduce between 4 network namespaces: `perf record -a` over a
# whole bench/peers.sh invocation of one system at one size (150 iterations, so the timed loop
# outweighs the set-up), then perf report's split by process and shared object, and its top
# symbols. Usage: profile.sh [SIZE] [SYSTEM:STRATEGY ...]; writes profile-SYSTEM[-STRATEGY].txt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
size=${1:-16M}
shift || true
[[ $# -gt 0 ]] || set -- kfbench:RING_RS_AG kfbench:RING_RS_AG_BIDIR gloo
export KF_PEERS_RUN_TIMEOUT=${KF_PEERS_RUN_TIMEOUT:-300}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for spec in "$@"; do
  sys=${spec%%:*} strategy=""
  [[ $spec == *:* ]] && strategy=${spec#*:}
  tag=$sys${strategy:+-$strategy}
  args=(--worlds netns --ranks 4 --sizes "$size" --systems "$sys" --iters 150 --warmup 3
    --out "$work/$tag")
  [[ -n $strategy ]] && args+=(--kf-strategy "$strategy")
  perf record -a -g -o "$work/$tag.data" -- "$repo/bench/peers.sh" "${args[@]}" \
    >"$work/$tag.log" 2>&1
  {
    echo "# $tag, 4 ranks, $size, 150 iterations: bench/peers.sh's row"
    tail -1 "$work/$tag/peers.csv"
    echo "# samples by process and object (perf report --sort comm,dso, >= 1%)"
    perf report -i "$work/$tag.data" --no-children --sort comm,dso -g none --percent-limit 1 \
      --stdio 2>/dev/null | grep -v '^#' | grep '%' | sed 's/  */ /g'
    echo "# top symbols (perf report --sort comm,symbol, >= 0.7%)"
    perf report -i "$work/$tag.data" --no-children --sort comm,symbol -g none \
      --percent-limit 0.7 --stdio 2>/dev/null | grep -v '^#' | grep '%' | cut -c1-120 | sed 's/  */ /g'
  } >"$here/profile-$tag.txt"
  echo "profile: $tag done" >&2
done
