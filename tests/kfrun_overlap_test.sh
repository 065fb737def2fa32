#!/usr/bin/env bash
# Overlap on real processes: kfrun starts 2 kftrain workers (ResNet-50's real gradient tensors,
# every allreduce checked with -verify) whose steps take 120 ms of profiled compute. With
# --bucketing kungfu, ddp and horovod the first bucket is ready long before the compute ends, so
# in every step but the first of every worker the communication must start before the compute is
# done: steps.csv's exposed_comm_s is less than comm_s (step 0: see below). With none,
# communication follows the compute and the column is absent. Bad flags exit non-zero naming the
# flag.
#   kfrun_overlap_test.sh KFRUN KFTRAIN
set -uo pipefail
KFRUN="$1"
KFTRAIN="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/port_lease.sh"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

for mode in none kungfu ddp horovod; do
  lease_ports 4
  if ! timeout 120 "$KFRUN" -np 2 -q -port-range "$PORT_BASE-$((PORT_BASE + 3))" "$KFTRAIN" \
      --model resnet50 --device v100 --batch 32 --compute-ms 120 --bucketing "$mode" --steps 5 \
      --verify --q --out "$WORK/$mode" >"$WORK/$mode.log" 2>&1; then
    cat "$WORK/$mode.log"; fail "$mode: kfrun exited non-zero"; continue
  fi
  if /usr/bin/python3 - "$WORK/$mode" "$mode" <<'PY'
import csv, glob, sys
root, mode = sys.argv[1], sys.argv[2]
rows = [r for f in sorted(glob.glob(root + "/*/steps.csv")) for r in csv.DictReader(open(f))]
if len(rows) != 10:
    sys.exit(f"  {mode}: {len(rows)} step records, expected 2 workers x 5 steps")
if mode == "none":
    if "exposed_comm_s" in rows[0]:
        sys.exit("  none: steps.csv has exposed_comm_s, but nothing overlapped")
    sys.exit(0)
hidden = [float(r["comm_s"]) - float(r["exposed_comm_s"]) for r in rows]
print(f"  {mode}: communication hidden behind compute per step (ms): "
      + " ".join(f"{h * 1e3:.1f}" for h in hidden))
# Step 0 need not overlap (it must still record sane columns). Nothing aligns the workers before
# it, and it is the step that allocates the 100 MB of gradient buffers (zero-filled on the loop,
# inside the step): on a host slow to fault pages in, the workers start its compute hundreds of ms
# apart. The later one then gets the earlier one's buckets before its own collectives exist, and
# after the engine's remote_hold copies them out on its loop into fresh memory, which can outlast
# its whole compute: its marks and its compute's end then run in one go, so no communication of
# that worker starts while it computes (with horovod, whose launches wait for the next cycle tick,
# none at all; kungfu and ddp launch in the mark, microseconds before the end). From step 1 on,
# the previous step's allreduce aligns the workers and the buffers are warm: no such excuse.
bad = [(r["rank"], r["step"]) for r, h in zip(rows, hidden)
       if (h <= 0 if r["step"] != "0" else h < 0) or float(r["exposed_comm_s"]) < 0]
sys.exit(f"  {mode}: no overlap in (rank, step) {bad}" if bad else 0)
PY
  then echo "ok   $mode"; else fail "$mode"; fi
done

expect_error() {  # expect_error WHAT PATTERN -- kftrain flags...
  local what="$1" pattern="$2"; shift 3
  if "$KFTRAIN" "$@" >"$WORK/err.log" 2>&1; then fail "$what: exited 0"; return; fi
  grep -q -- "$pattern" "$WORK/err.log" || { cat "$WORK/err.log"; fail "$what: no '$pattern'"; return; }
  echo "ok   $what"
}
expect_error "unknown mode" "--bucketing" -- --bucketing fifo
expect_error "fusion with ddp" "--fusion: only with --bucketing none" -- --bucketing ddp --fusion 1000
expect_error "numeric with ddp" "not with --numeric" -- --bucketing ddp --numeric mlp
expect_error "gpu with horovod" "--bucketing horovod: not with -gpu" -- --bucketing horovod -gpu
[[ $failures -eq 0 ]]
