#!/usr/bin/env bash
# artifact/fidelity.sh's real part at --quick (4 namespaces, 1 and 16 MiB, 3 strategies, with and
# without the iperf3 flood, one run each): it records every cell (kfbench's times and worker 0's
# sockets, sampled by ss), the congestion control the namespaces ran and their host queue (fair:
# each flood stream through a class of its own; fifo: tbf alone, also run, with a shallow switch
# queue: --switch-queue) and each namespace's TCP loss counters, and leaves the host's
# list of allowed congestion controls as it found it, also when `--tcp` names one the kernel does
# not have (exit 1, naming --tcp); an unknown --host-queue and a --switch-queue that is not a
# number of bytes are refused (exit 2, naming the flag). Skips
# (exit 77) where namespaces or iperf3 are not available.
#   fidelity_real_test.sh BUILD_DIR
set -uo pipefail
BUILD="$1"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
ALLOWED=/proc/sys/net/ipv4/tcp_allowed_congestion_control
before="$(cat "$ALLOWED" 2>/dev/null)" || { echo "SKIP: no $ALLOWED"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

bash "$ROOT/artifact/fidelity.sh" --quick --parts real --reps 1 --build "$BUILD" \
  --out "$WORK/good" >"$WORK/good.log" 2>&1
rc=$?
[[ $rc -eq 77 ]] && { tail -1 "$WORK/good.log"; exit 77; }
[[ $rc -eq 0 ]] || { cat "$WORK/good.log"; fail "fidelity.sh --parts real exited $rc"; }
[[ "$(cat "$ALLOWED")" == "$before" ]] || fail "allowed congestion controls now '$(cat "$ALLOWED")', were '$before'"
[[ "$(cat "$WORK/good/real/tcp.txt")" == cubic ]] || fail "real/tcp.txt: '$(cat "$WORK/good/real/tcp.txt")', not cubic"
[[ "$(cat "$WORK/good/real/host_queue.txt")" == fair ]] || fail "real/host_queue.txt is not 'fair'"
head -1 "$WORK/good/real/RING_RS_AG_c1_r1.tc" | grep -q "^qdisc htb" || fail "fair: worker 0's egress is not htb"
# Worker 0's egress after the last contended cell: each flood stream went through its own class.
for class in 1:31 1:32; do
  sent=$(awk -v c="$class" '$1 == "class" && $3 == c { getline; print $2 }' \
    "$WORK/good/real/RING_RS_AG_c1_r1.tc")
  [[ "${sent:-0}" -gt 100000000 ]] || fail "flood class $class sent '${sent}' bytes"
done
for s in STAR BINARY_TREE_STAR RING_RS_AG; do
  for c in 0 1; do
    f="$WORK/good/real/${s}_c${c}_r1.json"
    # kfbench's rows: one per size, 1 and 16 MiB, none wrong.
    /usr/bin/python3 - "$f" <<'PY' || fail "$f"
import json, sys
rows = json.loads(open(sys.argv[1]).read())["rows"]
assert [r["bytes"] for r in rows] == [1 << 20, 16 << 20], rows
assert all(r["wrong"] == 0 and r["p50_us"] > 0 for r in rows), rows
PY
    # Worker 0's sockets sampled while the cell ran; contended, iperf3's among them.
    ss="$WORK/good/real/${s}_c${c}_r1.ss.gz"
    samples="$(zcat "$ss")" || fail "$ss: not readable"
    [[ $(grep -c '^T ' <<<"$samples") -ge 3 ]] || fail "$ss: fewer than 3 samples"
    if ((c)); then
      for port in 5201 5202; do
        grep -qE ":$port( |\$)" <<<"$samples" || fail "$ss: no iperf3 socket to $port sampled"
      done
    fi
  done
done
PYTHONPATH="$ROOT/analysis" /usr/bin/python3 - "$WORK/good" <<'PY' || fail "kfplot.fidelity.load_sockets"
import sys
from pathlib import Path
from kfplot import fidelity
stats = fidelity.load_sockets(Path(sys.argv[1]))
for s in fidelity.STRATEGIES:
    assert stats[(s, True, "flood")].samples > 0, s
    assert stats[(s, True, "job")].samples > 0, s
PY

bash "$ROOT/artifact/fidelity.sh" --quick --parts real --reps 1 --build "$BUILD" \
  --out "$WORK/fifo" --host-queue fifo --switch-queue 524288 >"$WORK/fifo.log" 2>&1 ||
  { cat "$WORK/fifo.log"; fail "--host-queue fifo --switch-queue 524288"; }
[[ "$(cat "$WORK/fifo/real/host_queue.txt")" == fifo ]] || fail "fifo: real/host_queue.txt is not 'fifo'"
# The .tc file starts with worker 0's egress qdisc (then the bridge port's, a tbf in both modes).
head -1 "$WORK/fifo/real/RING_RS_AG_c1_r1.tc" | grep -q "^qdisc tbf" || fail "fifo: worker 0's egress is not tbf"
grep -q "^class htb" "$WORK/fifo/real/RING_RS_AG_c1_r1.tc" && fail "fifo: classes at worker 0's egress"
# The bridge port's tbf holds 512 KiB: tc shows it as the latency that drains it beyond the
# 256 KiB bucket at 1 Gbit/s, about 2 ms (100 ms by default).
lat=$(awk '/^qdisc tbf/ { n++ } n == 2 { for (i = 1; i < NF; i++) if ($i == "lat") print $(i + 1); exit }' \
  "$WORK/fifo/real/RING_RS_AG_c1_r1.tc")
[[ "$lat" =~ ^[0-9.]+ms$ ]] && awk -v l="${lat%ms}" 'BEGIN { exit !(l > 1 && l < 4) }' ||
  fail "--switch-queue 524288: the bridge port's tbf latency is '$lat', not about 2 ms"
[[ "$(cat "$WORK/fifo/real/switch_queue.txt")" == 524288 ]] || fail "real/switch_queue.txt is not 524288"
[[ "$(cat "$WORK/good/real/switch_queue.txt")" == default ]] || fail "default run: real/switch_queue.txt"
# Every namespace's loss counters per cell; a 16 MiB gather into a 512 KiB port loses segments.
for s in STAR BINARY_TREE_STAR RING_RS_AG; do
  n=$(awk '$2 ~ /^Tcp/ && $3 ~ /^-?[0-9]+$/' "$WORK/fifo/real/${s}_c0_r1.nstat" | wc -l)
  [[ $n -eq 30 ]] || fail "${s}_c0_r1.nstat: $n counter lines, not 5 namespaces x 6"
done
retrans=$(awk '$2 == "TcpRetransSegs" { t += $3 } END { print t + 0 }' "$WORK/fifo/real/STAR_c0_r1.nstat")
[[ $retrans -gt 0 ]] || fail "STAR into a 512 KiB switch port retransmitted nothing"

bash "$ROOT/artifact/fidelity.sh" --quick --parts real --build "$BUILD" --out "$WORK/bad" \
  --host-queue shared >"$WORK/bad.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] || { cat "$WORK/bad.log"; fail "--host-queue shared exited $rc, not 2"; }
grep -q -- "--host-queue 'shared'" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "the error does not name --host-queue"; }

bash "$ROOT/artifact/fidelity.sh" --quick --parts real --build "$BUILD" --out "$WORK/bad" \
  --switch-queue 512k >"$WORK/bad.log" 2>&1
rc=$?
[[ $rc -eq 2 ]] || { cat "$WORK/bad.log"; fail "--switch-queue 512k exited $rc, not 2"; }
grep -q -- "--switch-queue '512k'" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "the error does not name --switch-queue"; }

bash "$ROOT/artifact/fidelity.sh" --quick --parts real --reps 1 --build "$BUILD" \
  --out "$WORK/bad" --tcp no-such-cc >"$WORK/bad.log" 2>&1
rc=$?
[[ $rc -eq 1 ]] || { cat "$WORK/bad.log"; fail "--tcp no-such-cc exited $rc, not 1"; }
grep -q -- "--tcp no-such-cc" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "the error does not name --tcp"; }
[[ "$(cat "$ALLOWED")" == "$before" ]] || fail "after a failed run the allowed list is '$(cat "$ALLOWED")'"
echo "PASS: 6 real cells on cubic with fair host queues and 6 with fifo ones and a 512 KiB switch" \
  "queue, worker 0's sockets and the loss counters sampled; the host's allowed list restored;" \
  "a bad --tcp, --host-queue and --switch-queue refused"
