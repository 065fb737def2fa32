#!/usr/bin/env bash
# Workers die with their launcher: kfrun is killed with SIGKILL (no handler runs) while its
# workers train, in plain and in elastic mode; within 2 s no worker may be left.
#   kfrun_parent_death_test.sh KFRUN KFTRAIN
set -uo pipefail
KFRUN="$1"
KFTRAIN="$2"
WORK="$(mktemp -d)"
trap 'pkill -9 -P $$ 2>/dev/null; rm -rf "$WORK"' EXIT
source "$(dirname "$0")/port_lease.sh"
lease_ports 16
BASE=$PORT_BASE
fail=0

check_mode() {
  local mode="$1"
  shift
  "$KFRUN" "$@" "$KFTRAIN" -model resnet56 -compute-ms 30 -steps 100000 -q >"$WORK/$mode.log" 2>&1 &
  local runner=$!
  # Wait until both workers run (bounded).
  local workers=""
  for _ in $(seq 100); do
    workers="$(pgrep -P "$runner" | tr '\n' ' ')"
    [[ $(wc -w <<<"$workers") -ge 2 ]] && break
    sleep 0.1
  done
  if [[ $(wc -w <<<"$workers") -lt 2 ]]; then
    echo "FAIL ($mode): the workers did not start"; cat "$WORK/$mode.log"; fail=1; return
  fi
  sleep 1
  kill -9 "$runner"
  wait "$runner" 2>/dev/null
  local left=""
  for _ in $(seq 20); do
    left=""
    for pid in $workers; do
      if kill -0 "$pid" 2>/dev/null && [[ "$(ps -o stat= -p "$pid")" != Z* ]]; then left+="$pid "; fi
    done
    [[ -z "$left" ]] && break
    sleep 0.1
  done
  if [[ -n "$left" ]]; then
    echo "FAIL ($mode): workers $left outlived kfrun by 2 s"
    ps -o pid,ppid,stat,cmd -p ${left// /,}
    kill -9 $left 2>/dev/null
    fail=1
  else
    echo "ok ($mode): workers $workers gone with kfrun"
  fi
}

check_mode plain -np 2 -port-range "$BASE-$((BASE + 4))"
check_mode elastic -w -np 2 -H 127.0.0.1:2 -builtin-config-port $((BASE + 15)) \
  -port-range "$((BASE + 5))-$((BASE + 9))"
exit $fail
