#!/usr/bin/env bash
# DDP (bench/torch_ddp.py, MLP, 20 steps) at 4 ranks on 2 cores: the package before (OLD_PY), the
# change as first tried (NEW_PY, its build/release/python: every wait driving, a 200 us poll) as
# it is and with KUNGFU_POLL_BEFORE_SLEEP=50us, in rounds. Writes OUT (default
# ddp-every-wait-poll.csv here): case,samples_per_s. Run from the repository root.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
old=${OLD_PY:?set OLD_PY to the package directory built before the change}
new=${NEW_PY:-$PWD/build/release/python}
out=${1:-$here/ddp-every-wait-poll.csv}
echo "case,samples_per_s" > "$out"
one() {  # CASE PACKAGE ENV...
  local tag=$1 pkg=$2; shift 2
  env "$@" PYTHONPATH="$pkg" timeout 600 build/release/apps/kfrun -q -np 4 /usr/bin/python3 \
    bench/torch_ddp.py kungfu --model mlp --steps 20 | sed -n 's/^.*stdout\] {/{/p' |
    /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.stdin.readline()); print(sys.argv[1], round(r["samples_per_s"], 2), sep=",")' "$tag" >> "$out"
}
for r in 1 2; do
  one old "$old" A=1
  one new50 "$new" KUNGFU_POLL_BEFORE_SLEEP=50us
  one new "$new" A=1
done
