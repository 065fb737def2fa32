#!/usr/bin/env bash
# The cost of gradient monitoring (the paper's Fig. 8), in the real world: 4 kftrain workers under
# kfrun (Unix sockets, one host) train an MLP with S-SGD (real math, real gradients), with no
# monitor, with the gradient noise scale every step, and with the gradient variance every step.
# Prints the median of REPEATS runs of each and the overhead in percent; -json FILE also writes
# them (and the configuration).
#   [COMPUTE_MS=profile|MS] [MODEL=resnet50] [DEVICE=k80] [BATCH=64] [STEPS=300] [REPEATS=3]
#     monitoring_overhead.sh [BUILD_DIR] [-json FILE]
# COMPUTE_MS is the compute time of a step, the knob that decides what share of a step the
# monitors' extra allreduce and math can be:
#   profile (default)  the profiled compute of MODEL on DEVICE at BATCH per worker: ResNet-50 on a
#                      K80 at batch 64 is 1233 ms a step (51.9 img/s per device; the paper's
#                      baseline is 49.2 img/s), the paper's setting;
#   a number           that many ms a step;
#   0                  no compute besides the MLP's own math (about 1 ms): a stress setting, where
#                      communication and the monitors are most of a step (an upper bound).
# kftrain runs the MLP's math first and waits out the rest of the compute time (the wait is not
# added on top of the math: compute = max(math, COMPUTE_MS)); the monitors' extra allreduce and
# their math after it come on top of that, as on a GPU.
set -euo pipefail
BUILD="${1:-$(dirname "$0")/../build/release}"
JSON=""
[[ "${2:-}" == "-json" ]] && JSON="$3"
REPEATS="${REPEATS:-3}"
STEPS="${STEPS:-300}"
COMPUTE_MS="${COMPUTE_MS:-profile}"
MODEL="${MODEL:-resnet50}"
DEVICE="${DEVICE:-k80}"
BATCH="${BATCH:-64}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

compute=(-model "$MODEL" -device "$DEVICE")
[[ "$COMPUTE_MS" == profile ]] || compute+=(-compute-ms "$COMPUTE_MS")

run() {  # name, extra flags -> "total samples/s" "median compute ms per step"
  local name="$1"
  shift
  "$BUILD/apps/kfrun" -np 4 -q "$BUILD/apps/kftrain" -numeric mlp -hidden 256 -features 128 \
    -classes 16 -train 65536 -test 1024 -batch "$BATCH" -steps "$STEPS" -eval-every 0 "${compute[@]}" \
    -q -out "$WORK/$name" "$@" >/dev/null
  python3 - "$WORK/$name" <<'PY'
import csv, glob, json, statistics, sys
d = sys.argv[1]
tp = sum(json.load(open(f))["throughput_samples_per_s"] for f in glob.glob(d + "/*/summary.json"))
cs = [float(r["compute_s"]) for f in glob.glob(d + "/*/steps.csv") for r in csv.DictReader(open(f))]
print(tp, 1000 * statistics.median(cs))
PY
  rm -rf "${WORK:?}/$name"
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Interleaved (baseline, gns, variance, baseline, ...) so drift in the machine's load hits all alike.
declare -A values
computes=()
for _ in $(seq 1 "$REPEATS"); do
  for config in baseline gns variance; do
    case $config in
      baseline) flags=() ;;
      gns) flags=(-gns-every 1) ;;
      variance) flags=(-variance-every 1) ;;
    esac
    read -r tp cms < <(run "$config" "${flags[@]}")
    values[$config]+="$tp "
    computes+=("$cms")
  done
done
declare -A med
for config in baseline gns variance; do
  # shellcheck disable=SC2086
  med[$config]="$(median ${values[$config]})"
done
cms="$(median "${computes[@]}")"

base="${med[baseline]}"
printf '# monitoring overhead: 4 workers, MLP 128-256-16, batch %s, S-SGD, compute %s (%.1f ms a step measured), %s steps, median of %s\n' \
  "$BATCH" "$([[ $COMPUTE_MS == profile ]] && echo "$MODEL on $DEVICE" || echo "$COMPUTE_MS ms")" "$cms" "$STEPS" "$REPEATS"
printf '%-10s %14s %10s\n' monitor "samples/s" overhead
for config in baseline gns variance; do
  v="${med[$config]}"
  printf '%-10s %14.1f %9.1f%%\n' "$config" "$v" "$(awk -v b="$base" -v v="$v" 'BEGIN {print 100 * (b - v) / b}')"
done
if [[ -n "$JSON" ]]; then
  printf '{"baseline": %s, "gns": %s, "variance": %s, "runs": {"baseline": [%s], "gns": [%s], "variance": [%s]}, "compute_ms": "%s", "model": "%s", "device": "%s", "measured_compute_ms_per_step": %s, "batch": %s, "steps": %s, "repeats": %s}\n' \
    "$base" "${med[gns]}" "${med[variance]}" \
    "$(echo ${values[baseline]} | tr ' ' ,)" "$(echo ${values[gns]} | tr ' ' ,)" "$(echo ${values[variance]} | tr ' ' ,)" \
    "$COMPUTE_MS" "$MODEL" "$DEVICE" "$cms" "$BATCH" "$STEPS" "$REPEATS" >"$JSON"
fi
