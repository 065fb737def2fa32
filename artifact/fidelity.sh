#!/usr/bin/env bash
# Fidelity of the simulated worlds against a real cluster of network namespaces.
#
#   artifact/fidelity.sh [--quick] [--out DIR] [--build DIR] [--reps N] [--jobs N]
#                        [--parts real,sim,report] [--set KEY=VALUE ...] [--tcp NAME]
#                        [--host-queue fair|fifo] [--switch-queue BYTES]
#
# real:   4 network namespaces on a Linux bridge (tests/netns_lib.sh), every link shaped to
#         1 Gbit/s each way (a 256 KiB token bucket), MTU 1500; one kfrun + `kfbench allreduce
#         --json` per namespace, sizes 1, 4, 16, 64 MiB (--quick: 1 and 16) over STAR,
#         BINARY_TREE_STAR and RING_RS_AG, without and with contention (2 greedy iperf3 streams
#         from worker 0's namespace to a 5th, "outside" one). Each cell is kfbench's median
#         iteration; with --reps N > 1 the median of N runs. Worker 0's TCP sockets are sampled
#         every 100 ms (`ss -tinm`, real/*.ss.gz). Skips (exit 77) where namespaces cannot be
#         made; always removes what it made.
#         A host's own egress (--host-queue): `fair` (default) is what a NIC under Linux's default
#         qdisc (fq_codel) gives: each connection its own queue, served in turn, under the
#         shaper (htb with one class per flow); `fifo` is tbf's one FIFO, where TCP small queues
#         share the link in proportion to each socket's pacing rate (artifact/README.md). The
#         bridge ports, the switch, keep tbf's drop-tail FIFO in both: by default up to
#         rate x 100 ms + burst (12.76 MB, where these runs drop nothing); --switch-queue BYTES
#         bounds it (tbf's limit) so that the switch drops, as a shallow-buffered one does, and
#         the simulated ports get as many full-size packets (topology.link.queue). Every
#         namespace's TCP counters (timeouts, retransmissions, recoveries: nstat) are kept per
#         cell (real/*.nstat) for the report's losses table.
# sim:    the same in kfsim, ns3 and flow worlds (artifact/scenarios/fidelity.yaml: one allreduce of
#         the size per step, no compute; the contended runs add a 2-flow contention event from w0
#         to outside); a cell is the median over steps of the slowest rank's allreduce time.
#         ns-3 samples its TCP senders every 100 ms (tcp_samples: tcp.csv per run).
# report: OUT/fidelity.csv, OUT/fidelity.md (cells within 10% of real, worst cells) and
#         OUT/fidelity.png/.pdf (analysis/kfplot/fidelity.py).
#
# --set: one more `kfsim --set` for every simulated run (another queue mapping, say).
# --tcp: the real namespaces' congestion control (net.ipv4.tcp_congestion_control, set in each
#        namespace). Default cubic: what ns-3 runs, and Linux's default; some kernels default to
#        bbr, which shares a contended link differently (artifact/README.md). `system` keeps
#        the kernel's default.
# OUT: artifact/out/fidelity (default). The build (apps/kfsim, kfrun, kfbench): build/release
# unless --build or $KF_BUILD. Exit code: 0 done (fidelity is reported per cell, not asserted),
# 1 a run failed, 2 bad usage, 77 no network namespaces here (with --parts including real).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PY=/usr/bin/python3

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }

QUICK=0
OUT="${KF_ARTIFACT_OUT:-$ROOT/artifact/out}/fidelity"
BUILD="${KF_BUILD:-$ROOT/build/release}"
REPS=""
JOBS=2
PARTS="real,sim,report"
SETS=()
TCP=cubic
HOST_QUEUE=fair
SWITCH_QUEUE=""
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) (($# >= 2)) || usage; OUT="$2"; shift ;;
    --build) (($# >= 2)) || usage; BUILD="$2"; shift ;;
    --reps) (($# >= 2)) || usage; REPS="$2"; shift ;;
    --jobs) (($# >= 2)) || usage; JOBS="$2"; shift ;;
    --parts) (($# >= 2)) || usage; PARTS="$2"; shift ;;
    --set) (($# >= 2)) || usage; SETS+=(--set "$2"); shift ;;
    --tcp) (($# >= 2)) || usage; TCP="$2"; shift ;;
    --host-queue) (($# >= 2)) || usage; HOST_QUEUE="$2"; shift ;;
    --switch-queue) (($# >= 2)) || usage; SWITCH_QUEUE="$2"; shift ;;
    -h | --help) usage ;;
    *) echo "fidelity.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
case "$HOST_QUEUE" in
  fair | fifo) ;;
  *) echo "fidelity.sh: --host-queue '$HOST_QUEUE': not fair or fifo" >&2; exit 2 ;;
esac
FRAME=1514  # a full-size frame at MTU 1500, as tbf counts it
if [[ -n "$SWITCH_QUEUE" ]]; then
  if [[ ! "$SWITCH_QUEUE" =~ ^[0-9]+$ ]] || ((SWITCH_QUEUE < 4 * FRAME)); then
    echo "fidelity.sh: --switch-queue '$SWITCH_QUEUE': not a whole number of bytes of at least" \
      "$((4 * FRAME)) (4 full-size frames)" >&2
    exit 2
  fi
  # The simulated switch ports hold packets, not bytes: as many full-size ones as fit.
  SETS+=(--set "topology.link.queue=$((SWITCH_QUEUE / FRAME))")
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
BUILD="$(cd "$BUILD" 2>/dev/null && pwd)" || { echo "fidelity.sh: no build at $BUILD" >&2; exit 1; }
KFSIM="$BUILD/apps/kfsim"
KFRUN="$BUILD/apps/kfrun"
KFBENCH="$BUILD/apps/kfbench"
SCENARIO="$HERE/scenarios/fidelity.yaml"
STRATEGIES=(STAR BINARY_TREE_STAR RING_RS_AG)
if ((QUICK)); then
  SIZES=(1MiB 16MiB)
  BENCH_SIZES=(-b 1M -e 16M -f 16)
  ITERS=5
  REPS="${REPS:-1}"
else
  SIZES=(1MiB 4MiB 16MiB 64MiB)
  BENCH_SIZES=(-b 1M -e 64M -f 4)
  ITERS=7
  REPS="${REPS:-3}"
fi
has_part() { [[ ",$PARTS," == *",$1,"* ]]; }
START=$SECONDS

# ---- real: network namespaces ----------------------------------------------------------------
real_part() {
  for b in "$KFRUN" "$KFBENCH"; do
    [[ -x "$b" ]] || { echo "fidelity.sh: $b is not built" >&2; return 1; }
  done
  WORKERS=4
  N=$((WORKERS + 1))  # namespace 4 is "outside": no worker, the flood's sink
  # Worker 0's TCP sockets every 100 ms while a cell runs (cwnd, RTT, pacing rate, bytes in the
  # qdisc: what TCP small queues let each socket keep in the tbf), one "T <epoch s>" line per
  # sample; the report summarises them per socket class (kfplot.fidelity.load_sockets).
  sample_sockets() {
    while :; do
      echo "T $(date +%s.%N)"
      ip netns exec "${TAG}n0" ss -tinmH 2>/dev/null
      sleep 0.1
    done
  }
  # --host-queue fair: a host's egress as a NIC under a per-flow fair qdisc (Linux's default
  # fq_codel; this kernel may lack it, but has htb and u32). The shaper is htb's root class (the
  # same 1 Gbit/s and 256 KiB bucket as tbf), with one leaf per flow that leaves the host: the
  # job's connection to each host (to its port), the ACKs of each host's connection to this one
  # (from our port), each flood stream (to its iperf3 server); anything else in a default leaf.
  # Every leaf has the same rate and quantum, so htb serves the busy ones in turn (DRR), as
  # fq_codel would. ns-3's host_qdisc: tsq and the flow world's lossless host queues model this.
  # The quantum must exceed the largest packet, a 64 KB GSO one with its headers: htb sends a
  # leaf's packet before it looks at the leaf's deficit, so with a smaller quantum it serves
  # packets in turn, not bytes, and a socket paced fast enough to build 64 KB packets takes
  # several times the share of one building small ones (measured: one flood stream at 580-700
  # Mbit/s, the other and the job's connections at 73, their guaranteed share).
  fair_host_queue() {  # namespace
    local ns="$1" h classes=(20 31 32) c
    for h in $(seq 1 "$N"); do classes+=($((40 + h)) $((60 + h))); done
    {
      echo "qdisc replace dev eth0 root handle 1: htb default 20"
      echo "class add dev eth0 parent 1: classid 1:1 htb rate $RATE ceil $RATE burst 256kb" \
        "cburst 256kb quantum 60000"
      for c in "${classes[@]}"; do
        # Guaranteed rates summing to at most the link's; the rest lent by quantum, in turn.
        echo "class add dev eth0 parent 1:1 classid 1:$c htb" \
          "rate $((RATE_MBIT / ${#classes[@]}))mbit ceil $RATE burst 256kb cburst 256kb" \
          "quantum 100000"
        echo "qdisc add dev eth0 parent 1:$c pfifo limit 10000"
      done
      local port
      for port in "${FLOOD_PORTS[@]}"; do
        echo "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dport $port 0xffff" \
          "flowid 1:$((31 + port - FLOOD_PORTS[0]))"
      done
      for h in $(seq 1 "$N"); do
        echo "filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst $SUBNET.$h/32" \
          "match ip dport $PORT 0xffff flowid 1:$((40 + h))"
        echo "filter add dev eth0 parent 1: protocol ip prio 2 u32 match ip dst $SUBNET.$h/32" \
          "match ip sport $PORT 0xffff flowid 1:$((60 + h))"
      done
    } >"$WORK/tc.$ns"
    tc -n "$ns" -batch "$WORK/tc.$ns" >"$WORK/tc.$ns.log" 2>&1 ||
      skip "--host-queue fair needs tc's htb qdisc and u32 filter ($(grep -m1 -i error \
        "$WORK/tc.$ns.log")); --host-queue fifo runs without them"
  }
  # Each namespace's TCP loss counters (absolute): "namespace counter value" lines. Counters are
  # per network namespace, so worker i's are its own (worker 0's include the flood's sockets).
  tcp_counters() {
    local i
    for i in $(seq 0 $((N - 1))); do
      ip netns exec "${TAG}n$i" nstat -asz 2>/dev/null | awk -v ns="$i" \
        '$1 ~ /^(TcpRetransSegs|TcpExtTCPTimeouts|TcpExtTCPLostRetransmit|TcpExtTCPSackRecovery|TcpExtTCPLossProbes|TcpExtTCPSpuriousRTOs)$/ { print ns, $1, $2 }'
    done
  }
  TAG="kffid$$"
  WORK="$(mktemp -d)"
  RATE=1gbit
  RATE_MBIT=1000
  PORT=10000  # kfrun -port-range 10000-10010: each namespace's one worker
  FLOOD_PORTS=(5201 5202)  # one iperf3 server per flood stream, so each is a flow of its own
  SUBNET=10.79.0
  MTU=1500
  source "$ROOT/tests/netns_lib.sh"
  ALLOWED_CC=/proc/sys/net/ipv4/tcp_allowed_congestion_control
  ALLOWED_BEFORE="$(cat "$ALLOWED_CC")"
  real_cleanup() {
    netns_cleanup
    # Put the host's list back as it was (a namespace may only pick what the host allows).
    [[ "$(cat "$ALLOWED_CC")" == "$ALLOWED_BEFORE" ]] || echo "$ALLOWED_BEFORE" >"$ALLOWED_CC"
  }
  trap real_cleanup EXIT INT TERM
  command -v iperf3 >/dev/null || skip "iperf3 is not installed (the contention flood)"
  netns_setup "$RATE"
  local ns
  if [[ "$HOST_QUEUE" == fair ]]; then
    for ns in $(seq 0 $((N - 1))); do fair_host_queue "${TAG}n$ns"; done
  fi
  echo "$HOST_QUEUE" >"$WORK/host_queue"
  if [[ "$TCP" != system && " $ALLOWED_BEFORE " != *" $TCP "* ]]; then
    echo "$ALLOWED_BEFORE $TCP" >"$ALLOWED_CC" 2>/dev/null
  fi
  for ns in $(seq 0 $((N - 1))); do
    if [[ "$TCP" != system ]] &&
      ! ip netns exec "${TAG}n$ns" sysctl -qw "net.ipv4.tcp_congestion_control=$TCP"; then
      echo "fidelity.sh: --tcp $TCP: not available here (net.ipv4.tcp_available_congestion_control:" \
        "$(cat /proc/sys/net/ipv4/tcp_available_congestion_control))" >&2
      return 1
    fi
  done
  ip netns exec "${TAG}n0" sysctl -n net.ipv4.tcp_congestion_control >"$WORK/tcp"
  local hosts="" outside="$SUBNET.$N"
  for i in $(seq 0 $((WORKERS - 1))); do hosts="${hosts:+$hosts,}$SUBNET.$((i + 1)):1"; done
  local port
  for port in "${FLOOD_PORTS[@]}"; do
    ip netns exec "${TAG}n$WORKERS" iperf3 -s -D -p "$port" --logfile "$WORK/iperf-server.log" ||
      skip "iperf3 -s failed"
  done
  mkdir -p "$OUT/real"
  rm -f "$OUT"/real/*.json "$OUT"/real/*.tc "$OUT"/real/*.ss.gz "$OUT"/real/*.nstat
  echo "${SWITCH_QUEUE:-default}" >"$OUT/real/switch_queue.txt"
  cp "$WORK/tcp" "$OUT/real/tcp.txt"  # the report names the congestion control the runs used
  cp "$WORK/host_queue" "$OUT/real/host_queue.txt"  # and the hosts' egress queue
  local rep strategy cont
  for rep in $(seq 1 "$REPS"); do
    for cont in 0 1; do
      for strategy in "${STRATEGIES[@]}"; do
        local floods=() pids=() status=0
        if ((cont)); then
          for port in "${FLOOD_PORTS[@]}"; do
            ip netns exec "${TAG}n0" iperf3 -c "$outside" -p "$port" -t 900 \
              >"$WORK/iperf.$port.log" 2>&1 &
            floods+=($!)
          done
          sleep 2  # the flood at full rate before the workers start
        fi
        echo "real: $strategy, contention $cont, run $rep/$REPS (load $(cut -d' ' -f1 /proc/loadavg))"
        local cell="$OUT/real/${strategy}_c${cont}_r${rep}"
        tcp_counters >"$WORK/nstat.before"
        sample_sockets >"$cell.ss" &
        local sampler=$!
        for i in $(seq 0 $((WORKERS - 1))); do
          ip netns exec "${TAG}n$i" "$KFRUN" -np $WORKERS -H "$hosts" -self "$SUBNET.$((i + 1))" \
            -port-range 10000-10010 -q -timeout 600s \
            "$KFBENCH" allreduce "${BENCH_SIZES[@]}" -n $ITERS -w 1 -c 1 -strategy "$strategy" \
            -json >"$WORK/out$i" 2>&1 &
          pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
        kill "$sampler" 2>/dev/null
        wait "$sampler" 2>/dev/null
        gzip -f "$cell.ss"
        # What the cell cost each namespace's TCP: "namespace counter increase".
        tcp_counters | awk 'NR == FNR { before[$1 " " $2] = $3; next }
          { print $1, $2, $3 - before[$1 " " $2] }' "$WORK/nstat.before" - >"$cell.nstat"
        if ((${#floods[@]})); then
          kill -INT "${floods[@]}" 2>/dev/null
          wait "${floods[@]}" 2>/dev/null
          for port in "${FLOOD_PORTS[@]}"; do
            grep -q "receiver" "$WORK/iperf.$port.log" ||
              echo "  warning: iperf3 to port $port reported no result:" \
                "$(tail -2 "$WORK/iperf.$port.log" | tr '\n' ' ')"
          done
          sleep 1  # the servers ready for the next flood
        fi
        if ((status != 0)); then
          for i in $(seq 0 $((WORKERS - 1))); do echo "--- host $i:"; cat "$WORK/out$i"; done
          echo "fidelity.sh: a real run failed ($strategy, contention $cont)" >&2
          return 1
        fi
        grep -o '{.*}' "$WORK/out0" | tail -1 >"$cell.json"
        # Worker 0's egress queue and the bridge port into it: sent, dropped, backlog (fair: and
        # what each flow's class sent).
        {
          tc -s -n "${TAG}n0" qdisc show dev eth0
          tc -s -n "${TAG}br" qdisc show dev "${TAG}p0"
          if [[ "$HOST_QUEUE" == fair ]]; then tc -s -n "${TAG}n0" class show dev eth0; fi
        } >"$cell.tc" 2>&1
      done
    done
  done
  real_cleanup
  trap - EXIT INT TERM
}

# ---- sim: ns3 and flow worlds ------------------------------------------------------------------
steps_for() {  # enough steps that the medians are over several steady ones (first step dropped)
  case "$1" in
    1MiB) echo 12 ;;
    4MiB) echo 8 ;;
    16MiB) echo 5 ;;
    *) echo 4 ;;
  esac
}

sim_one() {  # world strategy contention size
  local world="$1" strategy="$2" cont="$3" size="$4"
  local dir="$OUT/sim/$world/${strategy}_c${cont}_$size"
  local args=(--world "$world" --set "strategy=$strategy" --set "workload.tensors=[$size]"
              --set "steps=$(steps_for "$size")" "${SETS[@]}" --out "$dir" --quiet)
  # The flood: two greedy TCP flows from w0's host to a host outside the job (iperf3 -P 2),
  # running from the start; fidelity.py measures the steps that begin after it ramped up.
  ((cont)) && args+=(--set "events=[{contention: {from: w0, to: outside, flows: 2, start: 0s}}]")
  # ns-3's TCP senders, to set beside the real sockets (`ss`) in the report.
  [[ "$world" == ns3 ]] && args+=(--set "tcp_samples=100ms")
  if ! "$KFSIM" "$SCENARIO" "${args[@]}" >"$dir.log" 2>&1; then
    echo "fidelity.sh: kfsim failed: $world $strategy contention $cont $size (see $dir.log)" >&2
    tail -5 "$dir.log" >&2
    return 1
  fi
  echo "sim: $world $strategy contention $cont $size done"
}

sim_part() {
  [[ -x "$KFSIM" ]] || { echo "fidelity.sh: $KFSIM is not built" >&2; return 1; }
  rm -rf "$OUT/sim"
  mkdir -p "$OUT/sim/ns3" "$OUT/sim/flow"
  local failed=0 running=0 world strategy cont size
  # Largest first, so the long ns-3 runs do not end up alone at the end.
  local order=()
  for ((k = ${#SIZES[@]} - 1; k >= 0; k--)); do order+=("${SIZES[k]}"); done
  for size in "${order[@]}"; do
    for world in ns3 flow; do
      for cont in 0 1; do
        for strategy in "${STRATEGIES[@]}"; do
          sim_one "$world" "$strategy" "$cont" "$size" &
          if ((++running >= JOBS)); then
            wait -n || failed=1
            ((running--))
          fi
        done
      done
    done
  done
  while ((running > 0)); do
    wait -n || failed=1
    ((running--))
  done
  return $failed
}

status=0
if has_part real; then
  echo "== real: 4 namespaces, 1 Gbit/s links, host queue $HOST_QUEUE," \
    "switch queue ${SWITCH_QUEUE:-12762144} B, MTU 1500, TCP $TCP;" \
    "sizes ${SIZES[*]}; $REPS run(s) each"
  t0=$SECONDS
  real_part || exit 1
  echo "real part: $((SECONDS - t0)) s"
fi
if has_part sim; then
  echo "== sim: ns3 and flow worlds, $JOBS job(s) at a time"
  t0=$SECONDS
  sim_part || status=1
  echo "sim part: $((SECONDS - t0)) s"
fi
if has_part report; then
  PYTHONPATH="$ROOT/analysis${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m kfplot.fidelity "$OUT" \
    --sizes "$(IFS=,; echo "${SIZES[*]}")" --wall "$((SECONDS - START))" || status=1
fi
echo "fidelity.sh: $((SECONDS - START)) s in all; report in $OUT/fidelity.md"
exit $status
