#!/usr/bin/env bash
# A stopped (SIGSTOP, not dead) worker fails the job within the operation timeout, naming it:
# kftrain (many small and large allreduces per step) and kfbench (1 MiB allreduces, lent between
# same-host peers) run 3 workers with -timeout 3s; rank 1 is stopped mid-run. kfrun must exit
# non-zero within the timeout plus a close margin (3 s), and a survivor must name rank 1.
# The bound is on wall-clock time, so ctest runs this test alone (RUN_SERIAL). kfrun's own lines
# (-q is off) and the workers' are logged with their time since the stop, for a failure's report.
#   kfrun_stopped_peer_test.sh KFRUN KFTRAIN KFBENCH
set -uo pipefail
KFRUN="$1"
KFTRAIN="$2"
KFBENCH="$3"
WORK="$(mktemp -d)"
trap 'pkill -9 -P $$ 2>/dev/null; rm -rf "$WORK"' EXIT
source "$(dirname "$0")/port_lease.sh"
TIMEOUT_S=3
LIMIT_S=$((TIMEOUT_S + 3))
fail=0

check() {
  local name="$1"
  shift
  lease_ports 3
  local base=$PORT_BASE
  local logfd stamper
  exec {logfd}> >(while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done \
                    >"$WORK/$name.stamped")
  stamper=$!
  "$KFRUN" -np 3 -port-range "$base-$((base + 2))" "$@" >&"$logfd" 2>&1 &
  local runner=$!
  exec {logfd}>&-
  local victim=""
  for _ in $(seq 100); do  # rank 1: the worker whose KUNGFU_SELF_SPEC ends in base + 1
    for pid in $(pgrep -P "$runner"); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "KUNGFU_SELF_SPEC=127.0.0.1:$((base + 1))"; then
        victim=$pid
      fi
    done
    [[ -n "$victim" ]] && break
    sleep 0.1
  done
  if [[ -z "$victim" ]]; then
    echo "FAIL ($name): rank 1 did not start"; kill -9 "$runner"; wait "$runner" "$stamper"
    cat "$WORK/$name.stamped"; fail=1; return
  fi
  sleep 1.5
  kill -STOP "$victim"
  local start=$SECONDS stopped_at=$EPOCHREALTIME
  while kill -0 "$runner" 2>/dev/null && ((SECONDS - start < 30)); do sleep 0.05; done
  local took
  took=$(echo "$EPOCHREALTIME - $stopped_at" | bc)
  local still=0
  if kill -0 "$runner" 2>/dev/null; then
    still=1
    kill -9 "$runner" "$victim"
  fi
  wait "$runner"
  local status=$?
  kill -9 "$victim" 2>/dev/null
  wait "$stamper"
  # Each line as "+seconds since the stop", the way the failures below print the log.
  awk -v t0="$stopped_at" '{ t = $1; sub(/^[^ ]* /, ""); printf "%+7.3fs %s\n", t - t0, $0 }' \
    "$WORK/$name.stamped" >"$WORK/$name.log"
  if ((still)); then
    echo "FAIL ($name): kfrun still runs 30 s after rank 1 stopped"; cat "$WORK/$name.log"
    fail=1; return
  fi
  if [[ $status -eq 0 ]]; then
    echo "FAIL ($name): kfrun exited 0"; cat "$WORK/$name.log"; fail=1
  elif (($(echo "$took > $LIMIT_S" | bc))); then
    echo "FAIL ($name): the job ended ${took}s after the stop, more than ${LIMIT_S}s"
    cat "$WORK/$name.log"; fail=1
  elif ! grep -qE "(timeout|peer_lost): .*rank 1 \(127\.0\.0\.1:$((base + 1))\)|from rank\(s\) 1|from rank 1" "$WORK/$name.log"; then
    echo "FAIL ($name): no survivor named rank 1"; cat "$WORK/$name.log"; fail=1
  else
    echo "ok ($name): failed ${took}s after the stop (exit $status)"
    grep -E "kf(train|bench): " "$WORK/$name.log" | head -2
  fi
}

check kftrain "$KFTRAIN" -model resnet56 -compute-ms 30 -steps 100000 -timeout ${TIMEOUT_S}s -q
check kfbench "$KFBENCH" allreduce -b 1M -e 1M -n 1000000 -w 1 -timeout ${TIMEOUT_S}s
exit $fail
