#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Elastic training over SSH: kfrun -ssh -w on the first of 4 hosts (tests/ssh_cluster.sh), one
# slot per host, the config server built into the first host's runner (-builtin-config-port; the
# other runners are pointed at it). kftrain's scheduled_resize grows the job from 2 workers
# (hosts 1-2) to 4 (hosts 1-4) at step 6 and back to 2 at step 12. Checks: the launcher exits 0,
# every allreduce is right (-verify), every step was run by exactly the workers of its cluster,
# sizes 2, 4, 2 at the right steps, and the workers of hosts 3 and 4 were started by their own
# runners. Skips (77) without root or sshd.
#   kfrun_ssh_elastic_test.sh KFRUN KFTRAIN
set -uo pipefail
KFRUN="$1"
KFTRAIN="$2"
N=4
TAG="kfe$$"
SUBNET=10.80.0
WORK="$(mktemp -d)"
source "$(dirname "$0")/ssh_cluster.sh"
trap ssh_cluster_stop EXIT INT TERM
ssh_cluster_start
lease_ports 8
B=$PORT_BASE
hosts=""
for i in $(seq 0 $((N - 1))); do hosts="${hosts:+$hosts,}$(host_ip "$i"):1"; done
t=$SECONDS
KUNGFU_SECRET="kf-elastic-$$" timeout 200 ip netns exec "$(host_ns 0)" "$KFRUN" -ssh \
  -ssh-config "$SSH_CONFIG" -w -np 2 -H "$hosts" -builtin-config-port $((B + 4)) \
  -port-range "$B-$((B + 1))" -strategy BINARY_TREE_STAR -timeout 150s \
  "$KFTRAIN" -model resnet56 -compute-ms 30 -steps 18 -verify -timeout 30s -q \
  -policy scheduled_resize:schedule=6:4,12:2 -out "$WORK/records" >"$WORK/log" 2>&1
status=$?
took=$((SECONDS - t))
if [[ $status -ne 0 ]]; then
  cat "$WORK/log"
  echo "FAIL: kfrun -ssh -w exited with $status"
  exit 1
fi
grep -E "^\[kfrun@.*cluster version" "$WORK/log" | head -12
for i in 2 3; do
  grep -q "^\[kfrun@$(host_ip "$i")\] cluster version [0-9]*: 4 workers; starting $(host_ip "$i"):$B" \
    "$WORK/log" || { cat "$WORK/log"; echo "FAIL: host $((i + 1))'s runner started no worker"; exit 1; }
done
echo "the job took $took s"
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
detached == 2 or fail("%d workers detached, 2 expected" % detached)
sorted(steps) == list(range(18)) or fail("steps %s" % sorted(steps))
for k, rows in steps.items():
    want = 4 if 6 <= k < 12 else 2
    sizes = {int(r["cluster_size"]) for r in rows}
    sizes == {want} or fail("step %d: cluster sizes %s, want %d" % (k, sizes, want))
    len(rows) == want or fail("step %d run by %d workers, want %d" % (k, len(rows), want))
print("PASS: 2 -> 4 -> 2 workers over 4 hosts, every step run by exactly its cluster, every sum verified")
PY
