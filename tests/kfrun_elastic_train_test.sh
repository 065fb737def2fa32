#!/usr/bin/env bash
# Real elastic training: kfrun -w with its builtin config server starts 2 kftrain workers on
# loopback; the scheduled_resize policy grows the job to 4 at step 6 and shrinks it to 3 at step
# 12. kfrun starts the new workers when the config server's version changes; the 4th worker
# leaves by itself. Checks: kfrun exits 0, every allreduce result is right (-verify), every step
# was run by exactly the workers of its cluster, all agreeing on the step, and the sizes are
# 2, 4, 3 at the right steps.
#   kfrun_elastic_train_test.sh KFRUN KFTRAIN
set -uo pipefail
KFRUN="$1"
KFTRAIN="$2"
WORK="$(mktemp -d)"
trap 'pkill -9 -P $$ 2>/dev/null; rm -rf "$WORK"' EXIT
source "$(dirname "$0")/port_lease.sh"
lease_ports 16
BASE=$PORT_BASE

timeout 120 "$KFRUN" -w -np 2 -H 127.0.0.1:4 -builtin-config-port $((BASE + 15)) \
  -port-range "$BASE-$((BASE + 9))" -strategy BINARY_TREE_STAR -timeout 100s \
  "$KFTRAIN" -model resnet56 -compute-ms 30 -steps 18 -verify -timeout 30s -q \
  -policy scheduled_resize:schedule=6:4,12:3 -out "$WORK/records" >"$WORK/log" 2>&1
status=$?
if [[ $status -ne 0 ]]; then
  cat "$WORK/log"
  echo "FAIL: kfrun -w exited with $status"
  exit 1
fi
grep -E "\[kfrun\]|detached" "$WORK/log" | head -20

python3 - "$WORK/records" <<'PY'
import csv, glob, json, sys, collections
root = sys.argv[1]
def fail(msg):
    print("FAIL:", msg); sys.exit(1)
dirs = sorted(glob.glob(root + "/*"))
len(dirs) == 4 or fail("records of 4 workers expected, got %s" % dirs)
steps = collections.defaultdict(list)
detached = 0
for d in dirs:
    s = json.load(open(d + "/summary.json"))
    s["errors"] == [] or fail("%s: %s" % (d, s["errors"]))
    detached += bool(s.get("detached"))
    for r in csv.DictReader(open(d + "/steps.csv")):
        steps[int(r["step"])].append(r)
detached == 1 or fail("%d workers detached, 1 expected" % detached)
sorted(steps) == list(range(18)) or fail("steps %s" % sorted(steps))
for k, rows in steps.items():
    want = 2 if k < 6 else 4 if k < 12 else 3
    sizes = {int(r["cluster_size"]) for r in rows}
    sizes == {want} or fail("step %d: cluster sizes %s, want %d" % (k, sizes, want))
    len(rows) == want or fail("step %d run by %d workers, want %d" % (k, len(rows), want))
    len({r["rank"] for r in rows}) == want or fail("step %d: ranks %s" % (k, [r["rank"] for r in rows]))
print("PASS: 2 -> 4 -> 3 workers, every step run by exactly its cluster, every sum verified")
PY
