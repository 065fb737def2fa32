#!/bin/bash
# Two pseudo-hosts on loopback (TCP, one worker each), allreduce 1 MiB to 64 MiB, one job per size
# (as a training job with one bucket size: an earlier size would have warmed the allocator): kfbench
# built before the change ($OLD, a kfbench binary) against the tree's, $1 runs alternated, in the
# default 1 MiB chunks and in 256 KiB chunks. Writes run,build,chunk,bytes,p50_us,mean_us,busbw_gbs to $2.
# Run from anywhere with build/release built.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../../.."
B=$root/build/release
runs=${1:-4}; out=$2; old=${OLD:?set OLD to the kfbench built before the change}
echo "run,build,chunk,bytes,p50_us,mean_us,busbw_gbs" > "$out"
one() {  # BINARY CHUNK SIZE
  export KUNGFU_SECRET=pool$$
  local P=$((20000 + RANDOM % 20000)) hosts=127.0.0.1:1,127.0.0.2:1 tmp
  tmp=$(mktemp -d)
  local A=(allreduce -b "$3" -e "$3" -n 30 -w 3 -chunk "$2")
  timeout 300 "$B/apps/kfrun" -q -v=false -np 2 -H $hosts -self 127.0.0.1 -port-range $P-$((P + 9)) \
    -runner-port $((P + 10)) "$1" "${A[@]}" > "$tmp/r0" 2>&1 &
  local a=$!
  timeout 300 "$B/apps/kfrun" -q -v=false -np 2 -H $hosts -self 127.0.0.2 -port-range $P-$((P + 9)) \
    -runner-port $((P + 10)) "$1" "${A[@]}" > "$tmp/r1" 2>&1
  wait $a
  # size count type redop root time algbw busbw #wrong p50 p99
  grep -E '^\s+[0-9]+ ' "$tmp/r0" | awk '{print $1 "," $10 "," $6 "," $8}'
  rm -rf "$tmp"
}
for run in $(seq 1 "$runs"); do
  order="old new"; [ $((run % 2)) = 0 ] && order="new old"
  for build in $order; do
    bin=$B/apps/kfbench; [ "$build" = old ] && bin=$old
    for chunk in 1M 256K; do
      for size in 1M 4M 16M 64M; do
        one "$bin" "$chunk" "$size" | sed "s/^/$run,$build,$chunk,/" >> "$out"
      done
    done
  done
done
