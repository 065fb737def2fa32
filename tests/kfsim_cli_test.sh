#!/usr/bin/env bash
# kfsim's command-line contract: a bad scenario file or flag exits 2 with "file:line:col: message"
# (or the flag named); a good one exits 0 and writes every record file.
set -uo pipefail
kfsim="$1"
data="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0

expect_error() {  # name, expected stderr regex, kfsim args...
  local name="$1" pattern="$2"
  shift 2
  local err code
  err="$("$kfsim" "$@" --quiet --out "$work/out" 2>&1 >/dev/null)"
  code=$?
  if [[ $code -ne 2 ]]; then
    echo "FAIL $name: exit $code, want 2 ($err)"
    failures=$((failures + 1))
  elif ! grep -Eq -- "$pattern" <<<"$err"; then
    echo "FAIL $name: message '$err' does not match /$pattern/"
    failures=$((failures + 1))
  else
    echo "ok   $name: $err"
  fi
}

write() { cat >"$work/$1"; }

write unit.yaml <<'YAML'
steps: 3
topology: {kind: star, hosts: 2, link: {bandwidth: 1G}}
YAML
write worker.yaml <<'YAML'
steps: 3
topology: {kind: star, hosts: 2}
events:
  - straggler: {worker: 7, factor: 2, start: {step: 1}}
YAML
write negative.yaml <<'YAML'
steps: 3
topology: {kind: star, hosts: 2, link: {bandwidth: -5Gbps}}
YAML

write bucketing.yaml <<'YAML'
steps: 3
topology: {kind: star, hosts: 2}
workload: {bucketing: byteps}
YAML
# A profile file's errors point into the profile.
write zero_layer.yaml <<'YAML'
name: zero
layers:
  - {name: a, parameters: 0, forward_gflops: 1}
YAML
write no_params.yaml <<'YAML'
name: missing
layers:
  - {name: a, forward_gflops: 1}
YAML
write negative_time.yaml <<'YAML'
name: negative
layers:
  - {name: a, parameters: 10, times: {v100: {forward: -1ms, backward: 1ms}}}
YAML
for profile in zero_layer no_params negative_time; do
  write "uses_$profile.yaml" <<YAML
steps: 3
topology: {kind: star, hosts: 2}
workload: {profile: $profile.yaml, device: v100}
YAML
done

expect_error "unknown key" "bad_unknown_key.yaml:[0-9]+:[0-9]+: .*unknown key" "$data/bad_unknown_key.yaml"
expect_error "malformed YAML" "bad_malformed.yaml:[0-9]+:[0-9]+: " "$data/bad_malformed.yaml"
expect_error "bad unit" "unit.yaml:2:[0-9]+: topology.link.bandwidth: '1G' has no unit" "$work/unit.yaml"
expect_error "bad worker id" "worker.yaml:4:[0-9]+: .*worker 7 does not exist" "$work/worker.yaml"
expect_error "negative bandwidth" "negative.yaml:2:[0-9]+: .*must be positive" "$work/negative.yaml"
expect_error "missing file" "nope.yaml: cannot read file" "$work/nope.yaml"
expect_error "bad --set" "--set" "$work/unit.yaml" --set "topology.link.bandwidth=fast"
expect_error "unknown flag" "--frobnicate" "$data/full.yaml" --frobnicate
expect_error "unknown bucketing" "bucketing.yaml:3:[0-9]+: workload.bucketing: unknown bucketing 'byteps'" "$work/bucketing.yaml"
expect_error "profile: zero parameters" "zero_layer.yaml:3:[0-9]+: layers\[0\].parameters: must be at least 1" "$work/uses_zero_layer.yaml"
expect_error "profile: missing field" "no_params.yaml:3:[0-9]+: layers\[0\]: missing required key 'parameters'" "$work/uses_no_params.yaml"
expect_error "profile: negative time" "negative_time.yaml:3:[0-9]+: layers\[0\].times.v100.forward: must not be negative" "$work/uses_negative_time.yaml"

# A good run: exit 0 and every record written.
write good.yaml <<'YAML'
steps: 2
topology: {kind: star, hosts: 2, link: {bandwidth: 10Gbps, mtu: 9000}}
workload: {model: resnet56, device: v100, batch_per_worker: 16}
strategy: RING_RS_AG
YAML
if "$kfsim" "$work/good.yaml" --quiet --out "$work/good" && \
   for f in steps.csv peers.csv collectives.csv events.csv summary.json trace.json perf.json; do
     [[ -s "$work/good/$f" ]] || { echo "missing $f"; false; }; done; then
  echo "ok   good run writes every record"
else
  echo "FAIL good run"
  failures=$((failures + 1))
fi

# An injected failure: the run ends early, survivors report the lost peer by name, exit 0.
write fail.yaml <<'YAML'
steps: 6
topology: {kind: star, hosts: 3, link: {bandwidth: 10Gbps, mtu: 9000}}
workload: {model: resnet56, device: v100, batch_per_worker: 16}
strategy: STAR
timeout: 2s
events:
  - fail: {worker: 2, at: {step: 3}}
YAML
if "$kfsim" "$work/fail.yaml" --quiet --out "$work/fail" && \
   grep -q "fail,at" "$work/fail/events.csv" && \
   grep -q "rank 2 (host2:10000)" "$work/fail/summary.json"; then
  echo "ok   injected failure reported by the survivors"
else
  echo "FAIL injected failure"
  failures=$((failures + 1))
fi

# --compare over the arms of `variants:`: each arm in both worlds (OUT/ARM/{ns3,flow}/ and its
# per-step OUT/ARM/compare.csv), and one summary row per arm and world in OUT/compare.csv.
write arms.yaml <<'YAML'
steps: 3
topology: {kind: star, hosts: 3, link: {bandwidth: 10Gbps, mtu: 9000}}
workload: {model: resnet56, device: v100, batch_per_worker: 16}
strategy: RING_RS_AG
variants:
  ring: {strategy: RING_RS_AG}
  star: {strategy: STAR}
YAML
arms_ok() {
  local arm
  for arm in ring star; do
    [[ -s "$work/arms/$arm/ns3/steps.csv" && -s "$work/arms/$arm/flow/steps.csv" ]] ||
      { echo "$arm: records missing"; return 1; }
    [[ $(wc -l <"$work/arms/$arm/compare.csv") -eq 4 ]] || { echo "$arm: not 3 steps"; return 1; }
    grep -q "^$arm,flow," "$work/arms/compare.csv" || { echo "$arm: no flow row"; return 1; }
  done
  grep -q "dropped_packets" "$work/arms/star/ns3/summary.json"
}
if "$kfsim" "$work/arms.yaml" --quiet --compare ns3,flow --out "$work/arms" && arms_ok; then
  echo "ok   --compare runs every arm in both worlds"
else
  echo "FAIL --compare over variants"
  failures=$((failures + 1))
fi

# Where ns-3 drops packets (six hosts into one port with a 5-packet queue), --compare prints
# ns-3's drops and timeouts and the flow world's window backoffs and timeouts; with
# flow_tcp: fair, which has no losses, it says the flow world is optimistic there; where ns-3
# drops nothing (the ring above), no note.
write drops.yaml <<'YAML'
steps: 2
topology: {kind: star, hosts: 6, link: {bandwidth: 1Gbps, mtu: 9000, queue: 5}}
workload: {model: resnet56, device: v100, batch_per_worker: 16}
strategy: STAR
YAML
if "$kfsim" "$work/drops.yaml" --compare ns3,flow --out "$work/drops" >"$work/drops.txt" 2>&1 &&
   grep -q "packets dropped" "$work/drops.txt" &&
   grep -q "[1-9][0-9]* window backoffs, [1-9][0-9]* retransmission timeouts" "$work/drops.txt" &&
   ! grep -q "  note: " "$work/drops.txt" &&
   "$kfsim" "$work/drops.yaml" --compare ns3,flow --set flow_tcp=fair --out "$work/drops_fair" \
     >"$work/drops_fair.txt" 2>&1 &&
   grep -q "note: flow_tcp: fair has no windows and no losses" "$work/drops_fair.txt" &&
   "$kfsim" "$work/arms.yaml" --compare ns3,flow --out "$work/arms2" >"$work/arms2.txt" 2>&1 &&
   ! grep -q "  note: " "$work/arms2.txt"; then
  echo "ok   --compare notes what the flow world leaves out where ns-3 drops"
else
  echo "FAIL --compare loss note"; cat "$work/drops.txt"
  failures=$((failures + 1))
fi

# The summary names what the policy did about an event, and an event lasting to the end has no
# "after" rate (the flagship, in the flow world: contention from step 30, a switch soon after).
flagship="$(dirname "$0")/../scenarios/contention.yaml"
if "$kfsim" "$flagship" --world flow --out "$work/flagship" >"$work/flagship.txt" 2>&1 &&
   grep -Eq "^    adapted at step [0-9]+ \([0-9]+ steps in\): switch STAR -> STAR@1, then [0-9.]+ samples/s \([0-9.]+ of before\)" "$work/flagship.txt" &&
   grep -Eq "^  contention#1 \(line [0-9]+\) +[0-9.]+ +[0-9.]+ +- +[0-9.]+$" "$work/flagship.txt"; then
  echo "ok   the summary shows the adaptation and no rate for an empty window"
else
  echo "FAIL summary of an adaptive run"; cat "$work/flagship.txt"
  failures=$((failures + 1))
fi

# ... and lists the run's policy actions (elastic.yaml grows 2 -> 5 workers, then shrinks to 4).
if "$kfsim" "$(dirname "$0")/../scenarios/elastic.yaml" --world flow --out "$work/elastic" \
     >"$work/elastic.txt" 2>&1 &&
   grep -Eq "^  adaptations \(4\)$" "$work/elastic.txt" &&
   grep -Eq "^    step +8  resize +2 -> 3 workers" "$work/elastic.txt" &&
   grep -Eq "^    step +32  resize +5 -> 4 workers" "$work/elastic.txt"; then
  echo "ok   the summary lists the policy's actions"
else
  echo "FAIL summary of an elastic run"; cat "$work/elastic.txt"
  failures=$((failures + 1))
fi

echo "$((15 - failures)) passed, $failures failed"
[[ $failures -eq 0 ]]
