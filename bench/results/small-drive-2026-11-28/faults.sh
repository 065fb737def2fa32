#!/bin/bash
# Two pseudo-hosts on loopback (TCP), 200 allreduces of 2 MiB; rank 0 under perf stat (page
# faults, context switches, task clock). $1: KUNGFU_CALLER_DRIVES (0 or 1). Run from the
# repository root with build/release built.
set -u
B=build/release
export KUNGFU_SECRET=faults$$ KUNGFU_CALLER_DRIVES=$1
P=$((20000 + RANDOM % 20000)); hosts=127.0.0.1:1,127.0.0.2:1
A=(allreduce -b 2M -e 2M -n 200 -w 10)
tmp=$(mktemp -d)
timeout 60 perf stat -e page-faults,context-switches,cpu-migrations,task-clock -o "$tmp/perf" \
  $B/apps/kfrun -q -v=false -np 2 -H $hosts -self 127.0.0.1 -port-range $P-$((P+9)) \
  -runner-port $((P+10)) $B/apps/kfbench "${A[@]}" > "$tmp/r0" 2>&1 &
a=$!
timeout 60 $B/apps/kfrun -q -v=false -np 2 -H $hosts -self 127.0.0.2 -port-range $P-$((P+9)) \
  -runner-port $((P+10)) $B/apps/kfbench "${A[@]}" > "$tmp/r1" 2>&1
wait $a
grep -A1 p50 "$tmp/r0" | tail -1
grep -E "faults|switches|task-clock|elapsed" "$tmp/perf"
rm -rf "$tmp"
