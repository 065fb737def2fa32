#!/usr/bin/env bash
# The cost of gradient monitoring (the paper's Fig. 8), in the real world: 4 kftrain workers under
# kfrun (Unix sockets, one host) train an MLP with S-SGD, with no monitor, with the gradient noise
# scale every step, and with the gradient variance every step. Compute is the model's real math
# (no profiled wait), so the monitors' extra work and collectives show in full. Prints the median
# of REPEATS runs of each and the overhead in percent; -json FILE also writes them.
#   monitoring_overhead.sh [BUILD_DIR] [-json FILE]
set -euo pipefail
BUILD="${1:-$(dirname "$0")/../build/release}"
JSON=""
[[ "${2:-}" == "-json" ]] && JSON="$3"
REPEATS="${REPEATS:-3}"
STEPS="${STEPS:-300}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

run() {  # name, extra flags -> total samples/s
  local name="$1"
  shift
  "$BUILD/apps/kfrun" -np 4 -q "$BUILD/apps/kftrain" -numeric mlp -hidden 256 -features 128 \
    -classes 16 -train 65536 -test 1024 -batch 64 -steps "$STEPS" -eval-every 0 -compute-ms 0 \
    -q -out "$WORK/$name" "$@" >/dev/null
  python3 - "$WORK/$name" <<'PY'
import glob, json, sys
print(sum(json.load(open(f))["throughput_samples_per_s"] for f in glob.glob(sys.argv[1] + "/*/summary.json")))
PY
  rm -rf "${WORK:?}/$name"
}

# Interleaved (baseline, gns, variance, baseline, ...) so drift in the machine's load hits all alike.
declare -A values median
for _ in $(seq 1 "$REPEATS"); do
  values[baseline]+="$(run baseline) "
  values[gns]+="$(run gns -gns-every 1) "
  values[variance]+="$(run variance -variance-every 1) "
done
for config in baseline gns variance; do
  median[$config]="$(printf '%s\n' ${values[$config]} | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
done

base="${median[baseline]}"
printf '# monitoring overhead: 4 workers, MLP 128-256-16, batch 64, S-SGD, %s steps, median of %s\n' "$STEPS" "$REPEATS"
printf '%-10s %14s %10s\n' monitor "samples/s" overhead
for config in baseline gns variance; do
  v="${median[$config]}"
  printf '%-10s %14.1f %9.1f%%\n' "$config" "$v" "$(awk -v b="$base" -v v="$v" 'BEGIN {print 100 * (b - v) / b}')"
done
if [[ -n "$JSON" ]]; then
  printf '{"baseline": %s, "gns": %s, "variance": %s}\n' "$base" "${median[gns]}" "${median[variance]}" >"$JSON"
fi
