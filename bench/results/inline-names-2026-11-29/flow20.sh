#!/bin/bash
# The flow world at scale, shorter: scenarios/scale-1024.yaml for 20 steps, the kfsim built
# before the change ($OLD_KFSIM) and the tree's, alternated; wall seconds of the whole process.
# $1 rounds. Writes round,build,wall_s to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
rounds=${1:-4}
out=${2:?give the CSV to write}
old=${OLD_KFSIM:?set OLD_KFSIM to the kfsim built before the change}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "round,build,wall_s" > "$out"
for i in $(seq 1 "$rounds"); do
  for build in old new; do
    bin=$PWD/build/release/apps/kfsim; [ "$build" = old ] && bin=$old
    start=$(date +%s.%N)
    "$bin" scenarios/scale-1024.yaml --set steps=20 --out "$work/$build" -q > /dev/null
    end=$(date +%s.%N)
    echo "$i,$build,$(echo "$end - $start" | bc)" >> "$out"
  done
done
