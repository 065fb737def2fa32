#!/usr/bin/env bash
# Every distributed optimizer on real processes: kfrun starts 4 kftrain workers (Unix sockets on
# one host) training an MLP on a Gaussian-mixture task; each must reach >= 0.9 test accuracy in
# 200 steps, on every worker.
#   kfrun_training_test.sh KFRUN KFTRAIN
set -uo pipefail
KFRUN="$1"
KFTRAIN="$2"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
source "$(dirname "$0")/port_lease.sh"
failures=0
for sync in ssgd sma pair_avg ada_sgd; do
  lease_ports 10  # a fresh range per run: no TIME_WAIT from the last
  base=$PORT_BASE
  if ! timeout 120 "$KFRUN" -np 4 -q -port-range "$base-$((base + 9))" "$KFTRAIN" -numeric mlp \
      -hidden 32 -features 16 -classes 4 -separation 1.0 -train 4096 -test 1024 -seed 3 \
      -sync "$sync" -ada-switch-step 100 -lr 0.05 -steps 200 -eval-every 50 -compute-ms 1 -q \
      -out "$WORK/$sync" >"$WORK/$sync.log" 2>&1; then
    cat "$WORK/$sync.log"; echo "FAIL $sync: kfrun exited non-zero"; failures=$((failures + 1)); continue
  fi
  if python3 - "$WORK/$sync" "$sync" <<'PY'
import csv, glob, sys
root, sync = sys.argv[1], sys.argv[2]
acc = {}
for f in glob.glob(root + "/*/steps.csv"):
    for r in csv.DictReader(open(f)):
        for kv in filter(None, r["values"].split(";")):
            k, v = kv.split("=")
            if k == "accuracy":
                acc[r["rank"]] = float(v)
print("  %s: final accuracy per rank %s" % (sync, {k: round(v, 3) for k, v in sorted(acc.items())}))
sys.exit(0 if len(acc) == 4 and min(acc.values()) >= 0.9 else 1)
PY
  then echo "ok   $sync"; else echo "FAIL $sync"; failures=$((failures + 1)); fi
done
[[ $failures -eq 0 ]]
