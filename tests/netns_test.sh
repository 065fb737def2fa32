#!/usr/bin/env bash
# Multi-host test: 4 network namespaces joined by a bridge (in a namespace of its own, so the
# host's network is never touched), each veth limited to 1 Gbit/s with tbf, one kfrun + worker
# per namespace on 10.77.0.0/24. Checks that a 64 MiB RING_RS_AG allreduce is correct and that
# its busbw is 85-100% of the 1 Gbit/s line rate. Skips (exit 77) where namespaces cannot be
# made; always removes what it made.
#   netns_test.sh KFRUN KFBENCH
set -uo pipefail
KFRUN="$1"
KFBENCH="$2"
N=4
TAG="kf$$"
WORK="$(mktemp -d)"
LINE_GBPS=0.125  # 1 Gbit/s in GB/s (1e9)
# Jumbo frames, as cluster networks use: at MTU 1500 the TCP/IP/Ethernet headers and the ACKs of
# the reverse flow alone take ~6.5% of the line (measured busbw ~0.87 of it then); at 9000, <1%.
MTU="${KF_NETNS_MTU:-9000}"
SUBNET=10.77.0
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"
trap netns_cleanup EXIT INT TERM
netns_setup 1gbit
hosts=""
for i in $(seq 0 $((N - 1))); do hosts="${hosts:+$hosts,}$SUBNET.$((i + 1)):1"; done

# No reachability probe (ping may be missing): the workers' connects retry with backoff.
# One run: every namespace starts its kfrun; rank 0's JSON row goes to stdout.
run_once() {
  local pids=()
  for i in $(seq 0 $((N - 1))); do
    ip netns exec "${TAG}n$i" "$KFRUN" -np $N -H "$hosts" -self "10.77.0.$((i + 1))" \
      -port-range 10000-10010 -q -timeout 100s \
      "$KFBENCH" allreduce -b 64M -e 64M -n 5 -w 1 -c 1 -strategy RING_RS_AG -chunk 256K -json \
      >"$WORK/out$i" 2>&1 &
    pids+=($!)
  done
  local status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
  cat "$WORK/out0" >&2
  if [[ $status -ne 0 ]]; then
    for i in $(seq 1 $((N - 1))); do echo "--- host $i:" >&2; cat "$WORK/out$i" >&2; done
    echo "FAIL: a kfrun exited with $status" >&2
    return 1
  fi
  grep -o '{.*}' "$WORK/out0" | tail -1
}

# The bandwidth check needs the CPU to keep up with the line; on a shared, loaded machine one
# attempt may be starved, so up to three attempts are made and correctness is required of all.
for attempt in 1 2 3; do
  json="$(run_once)" || exit 1
  busbw="$(echo "$json" | sed -n 's/.*"busbw_gbps":\([0-9.e+-]*\).*/\1/p')"
  wrong="$(echo "$json" | sed -n 's/.*"wrong":\([0-9]*\).*/\1/p')"
  [[ -n "$busbw" && -n "$wrong" ]] || { echo "FAIL: no result from rank 0"; exit 1; }
  [[ "$wrong" == 0 ]] || { echo "FAIL: $wrong wrong elements"; exit 1; }
  ratio="$(awk -v b="$busbw" -v l="$LINE_GBPS" 'BEGIN { printf "%.3f", b / l }')"
  echo "attempt $attempt: 64 MiB RING_RS_AG allreduce over 4 namespaces: busbw $busbw GB/s = $ratio of 1 Gbit/s"
  if [[ -n "${KF_SANITIZED:-}" ]]; then
    # An instrumented build cannot keep up with the line; only the result is checked there.
    echo "sanitizer build ($KF_SANITIZED): result correct, speed not judged"
    exit 0
  fi
  if awk -v r="$ratio" 'BEGIN { exit !(r >= 0.85 && r <= 1.0) }'; then
    echo PASS
    exit 0
  fi
done
echo "FAIL: busbw is not within 85-100% of the line rate (load: $(cut -d' ' -f1-3 /proc/loadavg))"
exit 1
