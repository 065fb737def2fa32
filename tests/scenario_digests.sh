#!/usr/bin/env bash
# Runs every shipped scenario briefly in both simulated worlds and compares the SHA-256 of every
# record it writes with the committed list tests/data/scenario_digests.txt: all but perf.json
# (wall-clock figures) and an experiment's bookkeeping, experiment.json and run.json (they name
# this build and path). A refactoring must leave every digest as it was; a change of
# behaviour updates the list on purpose (--update) and says why in its commit.
#
#   tests/scenario_digests.sh KFSIM ROOT [--update]
#
# The ns-3 cases run a small model (ResNet-56) or fewer steps so the whole check stays near a
# minute; the flow world runs the files as shipped. Exit 0: every digest equal; 1: a difference
# (listed); 2: a run failed.
set -euo pipefail

kfsim="$1"
root="$2"
update="${3:-}"
expected="$root/tests/data/scenario_digests.txt"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

small=(--set workload.model=resnet56)
# name | scenario file | kfsim arguments
cases=(
  "contention.flow|scenarios/contention.yaml|--world flow"
  "contention-static.flow|scenarios/contention-static.yaml|--world flow"
  "elastic.flow|scenarios/elastic.yaml|--world flow"
  "resize.flow|scenarios/resize.yaml|--world flow"
  "straggler.flow|scenarios/straggler.yaml|--world flow"
  "strategies.flow|scenarios/strategies.yaml|--world flow"
  "scalability.flow|scenarios/scalability.yaml|--world flow"
  "adaptive-batch.flow|scenarios/adaptive-batch.yaml|--world flow --set steps=120"
  "scale-1024.flow|scenarios/scale-1024.yaml|--world flow --set topology.leaves=4 --set steps=3"
  "bucketing.flow|scenarios/bucketing.yaml|--world flow --set topology.hosts=4 --set steps=3"
  "fig7.flow|artifact/scenarios/fig7.yaml|--world flow"
  "fidelity.flow|artifact/scenarios/fidelity.yaml|--world flow"
  "contention.ns3|scenarios/contention.yaml|--world ns3 ${small[*]}"
  "contention-static.ns3|scenarios/contention-static.yaml|--world ns3 ${small[*]}"
  "elastic.ns3|scenarios/elastic.yaml|--world ns3 ${small[*]}"
  "resize.ns3|scenarios/resize.yaml|--world ns3 ${small[*]}"
  "straggler.ns3|scenarios/straggler.yaml|--world ns3 ${small[*]}"
  "strategies.ns3|scenarios/strategies.yaml|--world ns3 ${small[*]} --set steps=2"
  "scalability.ns3|scenarios/scalability.yaml|--world ns3 ${small[*]} --set steps=2"
  "adaptive-batch.ns3|scenarios/adaptive-batch.yaml|--world ns3 --set steps=30"
  "scale-1024.ns3|scenarios/scale-1024.yaml|--world ns3 --set topology.leaves=2 --set topology.hosts_per_leaf=4 ${small[*]} --set steps=2"
  "fig7.ns3|artifact/scenarios/fig7.yaml|--world ns3 ${small[*]} --set steps=2"
  "fidelity.ns3|artifact/scenarios/fidelity.yaml|--world ns3 --set workload.tensors=[1MiB] --set steps=3"
  "compare.contention|scenarios/contention.yaml|--compare ns3,flow ${small[*]} --set steps=12"
)

actual="$work/digests.txt"
: >"$actual"
for c in "${cases[@]}"; do
  IFS='|' read -r name file args <<<"$c"
  out="$work/runs/$name"
  # shellcheck disable=SC2086 # the arguments are words by design
  if ! "$kfsim" "$root/$file" $args --out "$out" -q >"$work/$name.log" 2>&1; then
    echo "scenario_digests: $name ($file $args) failed:" >&2
    cat "$work/$name.log" >&2
    exit 2
  fi
  (cd "$out" && find . -type f ! -name perf.json ! -name experiment.json ! -name run.json -printf '%P\n' | LC_ALL=C sort |
    while read -r f; do printf '%s %s %s\n' "$name" "$f" "$(sha256sum "$f" | cut -d' ' -f1)"; done) >>"$actual"
  echo "scenario_digests: $name done" >&2
done

if [[ "$update" == --update ]]; then
  cp "$actual" "$expected"
  echo "scenario_digests: wrote $(wc -l <"$expected") digests to $expected" >&2
  exit 0
fi
if ! diff -u "$expected" "$actual"; then
  echo "scenario_digests: records differ from $expected (lines above: - expected, + now)" >&2
  exit 1
fi
echo "scenario_digests: $(wc -l <"$actual") records byte-identical" >&2
