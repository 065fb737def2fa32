#!/usr/bin/env bash
# The TCP ceiling of bench/peers.sh's namespace world: how many bytes a second plain TCP streams
# move between its emulated hosts (tests/netns_lib.sh: a bridge, 10 Gbit/s tbf each way, MTU
# 9000, the same settings as peers.sh) in the patterns an allreduce makes, measured with iperf3.
# An allreduce's busbw cannot pass the per-stream rate of its pattern: at n ranks each rank sends
# and receives 2(n - 1)/n of the buffer, busbw's own factor.
#   both_ways_2: 0 -> 1 and 1 -> 0 at once, 2 hosts (a 2-rank ring or recursive doubling).
#   ring_4:      i -> i + 1 (mod 4), four streams at once, 4 hosts (RING_RS_AG's steps).
#   pairs_4:     0 <-> 1 and 2 <-> 3, four streams (a halving-doubling step).
#   one_way_2:   0 -> 1 alone (the link's rate, for scale).
# Run as root from the repository root:
#   bench/results/netns-ceiling-2026-12-07/ceiling.sh [ROUNDS] [SECONDS] [OUT] [FIRST_ROUND]
# Appends to OUT (default here/ceiling.csv; its header if new): round,pattern,stream,gbytes_per_s,sender_cpu,receiver_cpu
# (GB/s = 1e9 bytes a second, at the receiver; CPU: iperf3's own percent of one core).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rounds=${1:-3}
secs=${2:-4}
out=${3:-$here/ceiling.csv}
first=${4:-1}
command -v iperf3 >/dev/null || { echo "ceiling.sh: iperf3 is not installed" >&2; exit 1; }
# shellcheck disable=SC2034  # read by tests/netns_lib.sh
TAG="kfc$$" N=4 SUBNET=10.84.0 MTU=9000 WORK="$(mktemp -d)"
# shellcheck source=../../../tests/netns_lib.sh disable=SC1091
source tests/netns_lib.sh
trap netns_cleanup EXIT
netns_setup 10gbit
addr() { echo "$SUBNET.$(($1 + 1))"; }
port() { echo $((5301 + $1)); }  # stream k's port

# streams FROM:TO ... : one iperf3 client a stream, all at once, each to a server of its own.
streams() {
  local k=0 pair from to pids=()
  for pair in "$@"; do
    to=${pair#*:}
    ip netns exec "${TAG}n$to" iperf3 -s -1 -p "$(port $k)" -J >"$WORK/s$k.json" 2>&1 &
    k=$((k + 1))
  done
  sleep 0.5
  k=0
  for pair in "$@"; do
    from=${pair%%:*} to=${pair#*:}
    ip netns exec "${TAG}n$from" iperf3 -c "$(addr "$to")" -p "$(port $k)" -t "$secs" -J \
      >"$WORK/c$k.json" 2>&1 &
    pids+=($!)
    k=$((k + 1))
  done
  for p in "${pids[@]}"; do wait "$p"; done
  wait
}

report() {  # ROUND PATTERN STREAMS...
  local round=$1 pattern=$2 k=0 pair
  shift 2
  for pair in "$@"; do
    /usr/bin/python3 - "$WORK/c$k.json" "$round" "$pattern" "${pair/:/->}" <<'PY' >>"$out"
import json, sys
d = json.load(open(sys.argv[1]))
end = d["end"]
rate = end["sum_received"]["bits_per_second"] / 8e9
cpu = end["cpu_utilization_percent"]
print(f"{sys.argv[2]},{sys.argv[3]},{sys.argv[4]},{rate:.4f},"
      f"{cpu['host_total']:.1f},{cpu['remote_total']:.1f}")
PY
    k=$((k + 1))
  done
}

[[ -s "$out" ]] || echo "round,pattern,stream,gbytes_per_s,sender_cpu,receiver_cpu" >"$out"
for r in $(seq "$first" $((first + rounds - 1))); do
  for pattern in one_way_2 both_ways_2 ring_4 pairs_4; do
    case $pattern in
      one_way_2) set -- 0:1 ;;
      both_ways_2) set -- 0:1 1:0 ;;
      ring_4) set -- 0:1 1:2 2:3 3:0 ;;
      pairs_4) set -- 0:1 1:0 2:3 3:2 ;;
    esac
    echo "ceiling: round $r, $pattern" >&2
    streams "$@"
    report "$r" "$pattern" "$@"
  done
done
