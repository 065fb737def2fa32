#!/usr/bin/env bash
# The GPU figures of issue 8, on a machine with one or more NVIDIA GPUs:
#   1. the GPU tests (kernels vs the CPU kernels for every dtype and op, every allreduce path);
#   2. reduction kernel GB/s for every dtype and op vs the card's peak memory bandwidth and a
#      device-to-device cudaMemcpy;
#   3. kfbench --device cuda (nccl-tests table) for NCCL, NCCL_HIERARCHICAL, STAGED and
#      STAGED:RING_RS_AG: on 1 GPU (1 rank), on two pseudo-hosts (127.0.0.1 and 127.0.0.2, one
#      worker each) sharing GPU 0, which exercises the hierarchical path's TCP stage across host
#      masters, and with kfrun -np 2..N when there are N >= 2 GPUs;
#   4. the host-buffer baseline (kfbench on host memory) and a short GPU training run (kftrain -gpu).
# Usage: bench/gpu_report.sh [BUILD_DIR] [OUT_DIR] [MAX_BYTES]
#   defaults: build/release, out/gpu_report, 256M
# BUILD_DIR may be a bundle from bench/gpu_bundle.sh (for a GPU machine without this project's
# build dependencies): `source BUNDLE/env.sh` first.
set -uo pipefail
BUILD=${1:-build/release}
OUT=${2:-out/gpu_report}
MAX=${3:-256M}
mkdir -p "$OUT"
KFRUN="$BUILD/apps/kfrun"
KFBENCH="$BUILD/apps/kfbench"
KFTRAIN="$BUILD/apps/kftrain"
REDUCE="$BUILD/bench/gpu_reduce_bench"
for f in "$KFRUN" "$KFBENCH" "$KFTRAIN" "$REDUCE" "$BUILD/tests/gpu_test"; do
  [[ -x "$f" ]] || { echo "gpu_report: $f missing: build it first (cmake --build $BUILD)" >&2; exit 2; }
done
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
safe() { echo "$1" | tr ':' '_'; }

: >"$OUT/summary.txt"
nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
log "GPUs: ${NGPU:-0}"
head -20 "$OUT/nvidia-smi.txt" >>"$OUT/summary.txt"

log "1. GPU tests"
"$BUILD/tests/gpu_test" >"$OUT/gpu_test.txt" 2>&1
grep -E '^\[==========\]|^\[  PASSED  \]|^\[  (FAILED|SKIPPED) \] [0-9]+ test' "$OUT/gpu_test.txt" \
  | tee -a "$OUT/summary.txt"

log "2. reduction kernels (256 MiB buffers, every dtype x op)"
"$REDUCE" -bytes 256M -n 20 >"$OUT/reduce_kernels.txt" 2>&1
grep -E '^#' "$OUT/reduce_kernels.txt" | tee -a "$OUT/summary.txt"
"$REDUCE" -bytes 1G -n 10 -d f32,bf16,f16,f64 -o sum >"$OUT/reduce_kernels_1g.txt" 2>&1

STRATEGIES="NCCL NCCL_HIERARCHICAL STAGED STAGED:RING_RS_AG"
BENCH_FLAGS="allreduce --device cuda -b 8 -e $MAX -f 4 -n 20 -w 5 -c 1 -d float -o sum"
footer() { grep -E 'Avg bus bandwidth|wrong' "$1" | tail -2 | sed "s|^|$2: |" | tee -a "$OUT/summary.txt"; }

log "3a. kfbench --device cuda, 1 rank on GPU 0"
for s in $STRATEGIES; do
  f="$OUT/kfbench_1gpu_$(safe "$s").txt"
  "$KFBENCH" $BENCH_FLAGS -strategy "$s" >"$f" 2>&1
  footer "$f" "1 GPU $s"
done

log "3b. two pseudo-hosts (127.0.0.1, 127.0.0.2) of one worker each, both on GPU 0"
for s in NCCL_HIERARCHICAL STAGED STAGED:RING_RS_AG; do
  f="$OUT/kfbench_2hosts_1gpu_$(safe "$s").txt"
  H="127.0.0.1:1,127.0.0.2:1"
  "$KFRUN" -q -np 2 -H "$H" -self 127.0.0.2 -port-range 12000-12100 -timeout 5m \
    "$KFBENCH" $BENCH_FLAGS -strategy "$s" >/dev/null 2>&1 &
  other=$!
  "$KFRUN" -q -np 2 -H "$H" -self 127.0.0.1 -port-range 12000-12100 -timeout 5m \
    "$KFBENCH" $BENCH_FLAGS -strategy "$s" >"$f" 2>&1
  wait "$other"
  footer "$f" "2 pseudo-hosts x 1 worker, 1 GPU, $s"
done

if [[ "${NGPU:-0}" -ge 2 ]]; then
  log "3c. kfrun -np 2..$NGPU on one host, one GPU per worker"
  for np in 2 4 8; do
    [[ $np -le $NGPU ]] || continue
    for s in $STRATEGIES; do
      f="$OUT/kfbench_${np}gpu_$(safe "$s").txt"
      "$KFRUN" -q -np "$np" -port-range 13000-13100 -timeout 10m "$KFBENCH" $BENCH_FLAGS -strategy "$s" >"$f" 2>&1
      footer "$f" "$np GPUs $s"
    done
  done
fi

log "4a. host-buffer baseline: kfrun -np 2 kfbench allreduce (RING_RS_AG, host memory)"
f="$OUT/kfbench_host_2ranks.txt"
"$KFRUN" -q -np 2 -port-range 13000-13100 -timeout 5m "$KFBENCH" allreduce -b 8 -e "$MAX" -f 4 -n 20 -w 5 \
  -strategy RING_RS_AG >"$f" 2>&1
footer "$f" "host buffers, 2 ranks, RING_RS_AG"

log "4b. GPU training (kftrain -gpu): resnet50, batch 64, 20 steps, 1 worker per GPU"
np=$(( NGPU >= 1 ? NGPU : 1 ))
for s in NCCL NCCL_HIERARCHICAL STAGED; do
  f="$OUT/kftrain_resnet50_${np}gpu_$(safe "$s").txt"
  "$KFRUN" -q -np "$np" -port-range 13000-13100 -timeout 10m "$KFTRAIN" -gpu -gpu-strategy "$s" -gpu-tf32 \
    -model resnet50 -batch 64 -steps 20 >"$f" 2>&1
  echo "kftrain $np GPU(s) $s: $(grep -E '^step' "$f" | tail -1)" | tee -a "$OUT/summary.txt"
  # Correctness of the same path: every element of every gradient bucket checked (slow).
  "$KFRUN" -q -np "$np" -port-range 13000-13100 -timeout 10m "$KFTRAIN" -gpu -gpu-strategy "$s" -model resnet50 \
    -batch 8 -steps 3 -verify >"$f.verify" 2>&1 && echo "  verify: ok" | tee -a "$OUT/summary.txt" \
    || echo "  verify: FAILED (see $f.verify)" | tee -a "$OUT/summary.txt"
done
log "done: $OUT/summary.txt"
