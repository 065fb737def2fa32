#!/usr/bin/env bash
# A short soak (bench/soak.py): 4 kfbench workers under kfrun run every collective, mixed and
# checked, for SECONDS (default 40) while each worker's resident memory, threads and open
# descriptors are sampled twice a second. Asserts that all 4 workers ran and were sampled, every
# rank ran the same rounds, at least a full cycle of sizes x strategies, with every operation and
# no wrong element; that the open descriptors and threads did not change after the warm-up (the
# first 10 s: start-up and the first rounds' buffers, longer on a loaded machine); and that the
# resident-memory slope after it stayed under 32 MiB/min. That limit is loose on purpose: payloads
# of up to 2 MB come and go between samples, so over 30 s a flat worker's fitted slope wanders by
# several MiB/min; it still catches a leak of about 1 KiB per collective (the workers run tens of
# thousands a minute). Small leaks are the 20-minute soak's to find (./kf bench soak).
# Sanitizer builds (KF_SANITIZED set) judge everything but the slope: their quarantines grow.
#   soak_test.sh BUILD_DIR SOURCE_DIR [SECONDS]
set -euo pipefail
BUILD="$1"
SRC="$2"
SECONDS_RUN="${3:-40}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$SRC/tests/port_lease.sh"
lease_ports 10
slope_max=32768
[[ -n "${KF_SANITIZED:-}" ]] && slope_max=inf
minutes="$(awk -v s="$SECONDS_RUN" 'BEGIN { print s / 60 }')"
rc=0
/usr/bin/python3 "$SRC/bench/soak.py" --build "$BUILD" --out "$WORK/soak" --port-base "$PORT_BASE" \
  --interval 0.5 --warmup 10 --rss-slope-max "$slope_max" "$minutes" || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "FAIL: bench/soak.py exited $rc; kfrun's output:"
  cat "$WORK/soak/kfrun.log" 2>/dev/null || true
  exit 1
fi
/usr/bin/python3 - "$WORK/soak/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
fails = []
rep = s["kfbench"]
if [w["rank"] for w in s["workers"]] != [0, 1, 2, 3]:
    fails.append(f"workers sampled: {[w['rank'] for w in s['workers']]}")
if rep["rounds_per_rank"] != [rep["rounds"]] * 4:
    fails.append(f"rounds per rank {rep['rounds_per_rank']}")
# At least one full cycle of the 9 sizes x 12 strategies, so every size met every strategy.
if rep["rounds"] < 9 * 12:
    fails.append(f"only {rep['rounds']} rounds")
for name, op in rep["ops"].items():
    if op["calls"] == 0 or op["wrong"] != 0:
        fails.append(f"{name}: {op}")
for w in s["workers"]:
    if w["samples_judged"] < 20:
        fails.append(f"rank {w['rank']}: {w['samples_judged']} samples after the warm-up")
    if w["fd_min"] != w["fd_max"] or w["threads_min"] != w["threads_max"]:
        fails.append(f"rank {w['rank']}: fds {w['fd_min']}..{w['fd_max']}, "
                     f"threads {w['threads_min']}..{w['threads_max']}")
print(f"soak: {rep['rounds']} rounds, {rep['collectives']} collectives, RSS slopes KiB/min "
      f"{[w['rss_slope_kib_per_min'] for w in s['workers']]}, fds "
      f"{[w['fd_max'] for w in s['workers']]}")
for f in fails:
    print("FAIL:", f)
sys.exit(1 if fails else 0)
PY
