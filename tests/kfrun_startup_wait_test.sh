#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# A stuck start-up names who is missing: kfrun starts 2 of 3 workers of a job whose third host
# (127.0.0.2, a loopback pseudo-host) never gets a runner. Within the first 5 s of waiting every
# started worker prints which peers have not connected and from which hosts, again every 5 s,
# and when the connect timeout (KUNGFU_CONNECT_TIMEOUT=8s) passes it gives up with that list;
# kfrun then exits non-zero, well within the timeout plus a margin.
#   kfrun_startup_wait_test.sh KFRUN KFBENCH
set -uo pipefail
KFRUN="$1"
KFBENCH="$2"
WORK="$(mktemp -d)"
trap 'pkill -9 -P $$ 2>/dev/null; rm -rf "$WORK"' EXIT
source "$(dirname "$0")/port_lease.sh"
lease_ports 2
base=$PORT_BASE
fail() {
  echo "FAIL: $*"
  cat "$WORK/log"
  exit 1
}

start=$SECONDS
KUNGFU_SECRET=startup-test KUNGFU_CONNECT_TIMEOUT=8s timeout 40 \
  "$KFRUN" -np 3 -H 127.0.0.1:2,127.0.0.2:1 -self 127.0.0.1 -port-range "$base-$((base + 1))" \
  "$KFBENCH" allreduce -b 1K -e 1K -n 1 -w 0 -timeout 5s >"$WORK/log" 2>&1
code=$?
took=$((SECONDS - start))
[[ $code -ne 0 ]] || fail "kfrun exited 0 with a host missing"
[[ $code -ne 124 ]] || fail "kfrun still ran after 40 s"
((took <= 25)) || fail "kfrun took $took s (the connect timeout is 8 s)"
missing="1 of 2 peers not connected yet, from 1 host: 127.0.0.2 (rank 2 :$base)"
for r in 0 1; do
  grep -q "rank $r (127.0.0.1:$((base + r))) waiting 5 s: $missing" "$WORK/log" ||
    fail "rank $r did not say after 5 s whom it waits for"
  grep -q "rank $r (127.0.0.1:$((base + r))) gave up after [89] s: $missing" "$WORK/log" ||
    fail "rank $r did not give up with the list"
done
# The lines come through kfrun with the worker's prefix.
grep -q "^\[127.0.0.1.$base::stderr\] \[kf\] rank 0 .* waiting" "$WORK/log" ||
  fail "the waiting line is not relayed with the worker's prefix"
echo "kfrun exited $code after $took s; the waiting and giving-up lines name 127.0.0.2 (rank 2)"
grep -m2 "waiting\|gave up" "$WORK/log"
echo PASS
