#!/bin/bash
# The flow world at scale (bench/flow_scale.sh: scenarios/scale-1024.yaml, 100 steps) with the
# kfsim built before the change ($OLD_KFSIM) and the tree's, alternated. A Message is larger now
# (its name and a small payload inline), and the flow world moves two million a step.
# $1 pairs. Writes pair,build,wall_s,rss_mib to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
pairs=${1:-2}
out=${2:?give the CSV to write}
old=${OLD_KFSIM:?set OLD_KFSIM to the kfsim built before the change}
echo "pair,build,wall_s,rss_mib" > "$out"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    bin=$PWD/build/release/apps/kfsim; [ "$build" = old ] && bin=$old
    bench/flow_scale.sh "$bin" 100 | awk -v i="$i" -v b="$build" \
      '/wall/ {print i "," b "," $2 "," $6}' >> "$out"
  done
done
