#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# kfrun -ssh across 4 hosts (tests/ssh_cluster.sh: network namespaces on a bridge, each with a
# real sshd), one kfrun -ssh started on the first host, 2 workers per host:
#   1. a 64 MiB allreduce (kfbench, checked) is correct on all 8 workers; every host's runner
#      and workers report back through the launcher; the secret is on no command line;
#   2. kill -9 of the runner on host 3 fails the job within 30 s, naming that host;
#   3. Ctrl-C (SIGINT) to the launcher ends it, and no process is left on any host;
#   4. pre-flight: host 4's sshd down, another kfrun build, a worker port taken on host 2 and an
#      absent -nic each fail the pre-flight naming the host and the reason, and start nothing.
# Skips (77) without root or sshd; removes everything it made.
#   kfrun_ssh_test.sh KFRUN KFBENCH
set -uo pipefail
KFRUN="$1"
KFBENCH="$2"
N=4
TAG="kfs$$"
SUBNET=10.78.0
WORK="$(mktemp -d)"
source "$(dirname "$0")/ssh_cluster.sh"
trap ssh_cluster_stop EXIT INT TERM
t0=$SECONDS
ssh_cluster_start
echo "4 hosts with sshd on port $SSH_PORT, up in $((SECONDS - t0)) s"
lease_ports 8
B=$PORT_BASE
hosts=""
for i in $(seq 0 $((N - 1))); do hosts="${hosts:+$hosts,}$(host_ip "$i"):2"; done
# The worker leaves a mark, so "nothing was started" can be checked.
cat >"$WORK/worker.sh" <<EOF
#!/bin/sh
touch "$WORK/started.\$\$"
exec "$KFBENCH" "\$@"
EOF
chmod +x "$WORK/worker.sh"
SECRET="kf-ssh-test-secret-$$"
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

# launch LOG ARGS...: kfrun -ssh from host 0, in the background (pid in LAUNCHER).
launch() {
  local log=$1
  shift
  KUNGFU_SECRET=$SECRET ip netns exec "$(host_ns 0)" "$KFRUN" -ssh -ssh-config "$SSH_CONFIG" \
    -ssh-port "$SSH_PORT" -ssh-identity "$SSH_KEY" -np 8 -H "$hosts" \
    -port-range "$B-$((B + 1))" "$@" >"$log" 2>&1 &
  LAUNCHER=$!
}
# wait_exit PID SECONDS: waits for PID to end; its code in CODE, 999 if still running.
wait_exit() {
  local pid=$1 limit=$2 t
  for t in $(seq $((limit * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then CODE=999; else wait "$pid"; CODE=$?; fi
}
# workers_running: how many kfbench processes run on all hosts.
workers_running() {
  local i n=0
  for i in $(seq 0 $((N - 1))); do
    n=$((n + $(host_processes "$i" | grep -c "$KFBENCH")))
  done
  echo $n
}
wait_workers() {
  local t
  for t in $(seq 300); do
    [[ $(workers_running) -ge 8 ]] && return 0
    sleep 0.1
  done
  return 1
}
no_process_left() {
  local i t left
  for t in $(seq 100); do
    left=""
    for i in $(seq 0 $((N - 1))); do left+="$(host_processes "$i")"; done
    [[ -z "$left" ]] && return 0
    sleep 0.1
  done
  echo "$left"
  return 1
}

# ---- 1. a 64 MiB allreduce over 4 hosts ----
t=$SECONDS
launch "$WORK/run.log" -timeout 150s "$WORK/worker.sh" allreduce -b 64M -e 64M -n 2 -w 1 -c 1 \
  -strategy RING_RS_AG -json
wait_exit "$LAUNCHER" 170
took=$((SECONDS - t))
if [[ $CODE -ne 0 ]]; then
  fail "the 64 MiB allreduce job exited $CODE"
  cat "$WORK/run.log"
else
  json="$(grep -o '{.*}' "$WORK/run.log" | tail -1)"
  [[ "$json" == *'"ranks":8'* && "$json" == *'"wrong":0'* ]] || fail "no correct result: $json"
  for i in 1 2 3; do
    grep -q "^\[kfrun@$(host_ip "$i")\] started rank" "$WORK/run.log" ||
      fail "no runner output relayed from host $i"
  done
  echo "1. 64 MiB allreduce on 8 workers over 4 hosts: correct, $took s: $json"
fi

# ---- 2. a remote runner killed ----
t=$SECONDS
launch "$WORK/kill.log" -timeout 150s "$WORK/worker.sh" allreduce -b 4M -e 4M -n 100000 -w 1 \
  -timeout 10s
if ! wait_workers; then
  fail "2: the 8 workers did not start"
  cat "$WORK/kill.log"
else
  # The secret travels on stdin: it must be on no command line on any host.
  for i in $(seq 0 $((N - 1))); do
    if host_processes "$i" | grep -q "$SECRET"; then fail "the secret is on a command line on host $i"; fi
  done
  victim="$(host_processes 2 | grep -- "-ssh-child" | head -1 | cut -d' ' -f1)"
  killed_at=$SECONDS
  kill -9 "$victim"
  wait_exit "$LAUNCHER" 40
  took=$((SECONDS - killed_at))
  if [[ $CODE -eq 0 || $CODE -eq 999 ]]; then
    fail "2: the job did not fail after its runner on host 3 was killed (code $CODE)"
  elif ((took > 30)); then
    fail "2: the job took $took s to fail"
  elif ! grep -q "runner on $(host_ip 2) [a-z ]*exit code [1-9]" "$WORK/kill.log"; then
    fail "2: host 3 ($(host_ip 2)) is not named"
    cat "$WORK/kill.log"
  else
    echo "2. runner on host 3 killed: the job failed with $CODE after $took s:"
    grep "^\[kfrun\]" "$WORK/kill.log" | grep -v "started the runner" | head -6
  fi
  left="$(no_process_left)" || fail "2: processes left: $left"
fi

# ---- 3. Ctrl-C ----
launch "$WORK/int.log" -timeout 150s "$WORK/worker.sh" allreduce -b 4M -e 4M -n 100000 -w 1
if ! wait_workers; then
  fail "3: the 8 workers did not start"
  cat "$WORK/int.log"
else
  t=$SECONDS
  kill -INT "$LAUNCHER"
  wait_exit "$LAUNCHER" 30
  [[ $CODE -eq 130 ]] || fail "3: the launcher exited $CODE after SIGINT, not 130"
  if left="$(no_process_left)"; then
    echo "3. Ctrl-C: the launcher exited $CODE, no process left on any host after $((SECONDS - t)) s"
  else
    fail "3: processes left after Ctrl-C: $left"
  fi
fi

# ---- 4. pre-flight failures ----
rm -f "$WORK"/started.*
preflight() {  # preflight NAME EXPECTED-TEXT ARGS...
  local name=$1 want=$2
  shift 2
  launch "$WORK/pre-$name.log" "$@" "$WORK/worker.sh" allreduce -b 1K -e 1K
  wait_exit "$LAUNCHER" 60
  if [[ $CODE -ne 2 ]]; then
    fail "4 ($name): the launcher exited $CODE, not 2"
    cat "$WORK/pre-$name.log"
  elif ! grep -q -- "$want" "$WORK/pre-$name.log"; then
    fail "4 ($name): no '$want' in the output"
    cat "$WORK/pre-$name.log"
  else
    echo "4. pre-flight ($name): $(grep -- "$want" "$WORK/pre-$name.log" | head -1)"
  fi
}
cp "$KFRUN" "$WORK/kfrun-other" && echo "another build" >>"$WORK/kfrun-other"
preflight build "host $(host_ip 0): runs another kfrun build" -ssh-kfrun "$WORK/kfrun-other"
preflight nic "host $(host_ip 1): -nic eth9: no IPv4 address" -nic eth9
# SO_REUSEADDR: the earlier jobs' connections may still be in TIME_WAIT on that port.
on_host 1 python3 -c "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('$(host_ip 1)', $((B + 1)))); s.listen(); time.sleep(60)" &
holder=$!
sleep 1
preflight port "host $(host_ip 1): port $((B + 1)) is taken"
kill "$holder"
ssh_host_down 3
preflight sshd "host $(host_ip 3): cannot reach it over SSH: .*Connection refused"
if compgen -G "$WORK/started.*" >/dev/null; then fail "4: a worker started despite a failed pre-flight"; fi

((failed == 0)) || exit 1
echo PASS
