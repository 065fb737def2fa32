#!/usr/bin/env bash
# bench/gpu_report.sh on a machine without a GPU: the parts that need none still run, so the
# script cannot rot between the rare runs on a GPU machine.
#   - sections 1 (gpu_test: its GPU cases skip) and 4a (kfbench on host memory: 2 ranks on one
#     host, and two pseudo-hosts over TCP) run and write their summary lines;
#   - a chosen section's missing binary stops it before anything runs: exit 2 naming the file.
#   gpu_report_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
SRC="$1"
BUILD="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; [[ -f "$WORK/out/summary.txt" ]] && cat "$WORK/out/summary.txt"; exit 1; }

source "$(dirname "$0")/port_lease.sh"
lease_ports 1101  # gpu_report.sh sections 1 and 4a: PORT_BASE .. +1100
base=$PORT_BASE
KF_GPU_SECTIONS="1 4a" KF_GPU_STEP_TIMEOUT=120 KF_GPU_PORT_BASE="$base" \
  timeout 300 bash "$SRC/bench/gpu_report.sh" "$BUILD" "$WORK/out" 64K >"$WORK/log" 2>&1 ||
  { cat "$WORK/log"; fail "gpu_report.sh exited non-zero"; }
s="$WORK/out/summary.txt"
grep -q '^gpu_test exit 0$' "$s" || fail "no 'gpu_test exit 0' line"
grep -q '^\[  PASSED  \]' "$s" || fail "no gtest PASSED line"
for what in "host buffers, 2 ranks, RING_RS_AG" "host buffers, 2 pseudo-hosts x 1 worker, RING_RS_AG"; do
  grep -q "^$what: .*Out of bounds values : 0 OK" "$s" || fail "$what: no correct table"
  grep -q "^$what: .*Avg bus bandwidth" "$s" || fail "$what: no bus bandwidth"
done
rows=$(grep -cE '^\[[^]]*\] +[0-9]+ +[0-9]+ +float' "$WORK/out/kfbench_host_2hosts.txt")
[[ "$rows" -eq 7 ]] || fail "the pseudo-host table has $rows rows, not 7 (8 B to 64 KiB by 4x)"
# Only what the chosen sections run is needed, and its absence is named.
mkdir -p "$WORK/empty"
KF_GPU_SECTIONS="2" bash "$SRC/bench/gpu_report.sh" "$WORK/empty" "$WORK/out2" >"$WORK/log2" 2>&1
code=$?
[[ $code -eq 2 ]] || { cat "$WORK/log2"; fail "a missing gpu_reduce_bench: exit $code, not 2"; }
grep -q "$WORK/empty/bench/gpu_reduce_bench missing" "$WORK/log2" || { cat "$WORK/log2"; fail "the missing binary is not named"; }
echo "gpu_report.sh without a GPU: sections 1 and 4a ran; a missing binary is refused (exit 2)"
