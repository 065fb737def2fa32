#!/usr/bin/env bash
# Every GPU figure the README and docs/gpus.md report, on a machine with one or more NVIDIA GPUs:
#   1. the GPU tests (kernels vs the CPU kernels for every dtype and op, every allreduce path);
#   2. reduction kernel GB/s for every dtype and op vs the card's peak memory bandwidth and a
#      device-to-device cudaMemcpy, and pinned host <-> device copy GB/s (the staged ceiling);
#   3. kfbench --device cuda (nccl-tests table) for NCCL, NCCL_HIERARCHICAL, STAGED and
#      STAGED:RING_RS_AG: on 1 GPU (1 rank), on two pseudo-hosts (127.0.0.1 and 127.0.0.2, one
#      worker each) sharing GPU 0 (under MPS when present), which exercises the hierarchical
#      path's TCP stage across host masters, and with kfrun -np 2..N when there are N >= 2 GPUs;
#   4. host-buffer baselines (kfbench on host memory: 2 ranks on one host, and the two
#      pseudo-hosts over TCP) and short GPU training runs (kftrain -gpu), unfused and in 25 MiB
#      buckets, each path's gradients also verified element by element, and an elastic run
#      (1 -> 2 -> 1 workers, every gradient verified);
#   4d. overlap of the backward pass and the allreduces (kftrain -gpu --bucketing none, ddp and
#      kungfu) for resnet50 and vgg16 on the NCCL and STAGED paths, each mode's gradients also
#      verified, and on the two pseudo-hosts of 3b (STAGED over TCP), into overlap.csv;
#   5. sanitizers: compute-sanitizer memcheck over the kernel, device, path and overlap tests,
#      and, when KF_GPU_ASAN_TEST names a gpu_test built with KF_SANITIZE=address,undefined,
#      that binary (NCCL's own lasting allocations suppressed by tests/lsan_gpu.supp);
#   6. the Python package on CUDA memory (python/tests/test_gpu.py under this machine's python3,
#      the extension module built there when the build's is for another Python).
# Usage: bench/gpu_report.sh [BUILD_DIR] [OUT_DIR] [MAX_BYTES]
#   defaults: build/release, out/gpu_report, 256M
# Environment: KF_GPU_SECTIONS (e.g. "1 2 3a") runs only those sections (default: all);
# KF_GPU_MEMCHECK_TESTS is section 5's gtest filter (default: the kernel, device, path and
# overlap tests); KF_GPU_OVERLAP_STEPS is section 4d's steps per run (default 20);
# KF_GPU_STEP_TIMEOUT bounds each command in seconds (default 300), so a hang on a leased machine
# costs one step, not the lease; KF_GPU_PORT_BASE moves the workers' ports (default 12000).
# Without a GPU, sections 1 (the GPU tests skip) and 4a (host memory) still run: that is how
# tests/gpu_report_test.sh keeps this script working on machines without one.
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
SECTIONS=${KF_GPU_SECTIONS:-"1 2 3a 3b 3c 4a 4b 4c 4d 5 6"}
STEP_TIMEOUT=${KF_GPU_STEP_TIMEOUT:-300}
MEMCHECK_TESTS=${KF_GPU_MEMCHECK_TESTS:-'*GpuKernel*:GpuDevice.*:GpuPaths.*:*GpuStepProgramOverlap*'}
# Workers listen in PORT_BASE..+100 (pseudo-hosts), +1000..+1100 (one host), +2000..+2010 and
# +2100 (the elastic run and its config server).
PORT_BASE=${KF_GPU_PORT_BASE:-12000}
PSEUDO_PORTS="$PORT_BASE-$((PORT_BASE + 100))"
LOCAL_PORTS="$((PORT_BASE + 1000))-$((PORT_BASE + 1100))"
ELASTIC_PORTS="$((PORT_BASE + 2000))-$((PORT_BASE + 2010))"
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
# What the chosen sections run must be there before anything starts.
needs=()
if want 1 || want 5; then needs+=("$BUILD/tests/gpu_test"); fi
if want 2; then needs+=("$REDUCE"); fi
if want 3a || want 3b || want 3c || want 4a; then needs+=("$KFRUN" "$KFBENCH"); fi
if want 4b || want 4c || want 4d; then needs+=("$KFRUN" "$KFTRAIN"); fi
if want 6; then needs+=("$KFRUN"); fi
if [[ -n "${KF_GPU_ASAN_TEST:-}" ]] && want 5; then needs+=("$KF_GPU_ASAN_TEST"); fi
for f in "${needs[@]}"; do
  [[ -x "$f" ]] || { echo "gpu_report: $f missing: build it first (cmake --build $BUILD)" >&2; exit 2; }
done
log() { echo "== $*" | tee -a "$OUT/summary.txt"; }
bounded() { timeout -k 10 "$STEP_TIMEOUT" "$@"; }
safe() { echo "$1" | tr ':' '_'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

: >"$OUT/summary.txt"
NGPU=0
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
  NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
else
  echo "nvidia-smi: not found (no NVIDIA driver here)" >"$OUT/nvidia-smi.txt"
fi
log "GPUs: ${NGPU:-0}"
head -20 "$OUT/nvidia-smi.txt" >>"$OUT/summary.txt"

if want 1; then
  log "1. GPU tests"
  bounded "$BUILD/tests/gpu_test" >"$OUT/gpu_test.txt" 2>&1
  echo "gpu_test exit $?" >>"$OUT/gpu_test.txt"
  grep -E '^\[==========\]|^\[  PASSED  \]|^\[  (FAILED|SKIPPED) \] [0-9]+ test|^\[  FAILED  \] [A-Za-z]|^gpu_test exit' "$OUT/gpu_test.txt" \
    | tee -a "$OUT/summary.txt"
fi

if want 2; then
  log "2. reduction kernels (256 MiB buffers, every dtype x op)"
  bounded "$REDUCE" -bytes 256M -n 20 >"$OUT/reduce_kernels.txt" 2>&1
  grep -E '^#' "$OUT/reduce_kernels.txt" | tee -a "$OUT/summary.txt"
  bounded "$REDUCE" -bytes 1G -n 10 -d f32,bf16,f16,f64 -o sum >"$OUT/reduce_kernels_1g.txt" 2>&1
fi

STRATEGIES="NCCL NCCL_HIERARCHICAL STAGED STAGED:RING_RS_AG"
BENCH_FLAGS="allreduce --device cuda -b 8 -e $MAX -f 4 -n 20 -w 5 -c 1 -d float -o sum"
footer() { grep -E 'Avg bus bandwidth|Out of bounds' "$1" | tail -2 | sed "s|^|$2: |" | tee -a "$OUT/summary.txt"; }

if want 3a; then
  log "3a. kfbench --device cuda, 1 rank on GPU 0"
  for s in $STRATEGIES; do
    f="$OUT/kfbench_1gpu_$(safe "$s").txt"
    bounded "$KFBENCH" $BENCH_FLAGS -strategy "$s" >"$f" 2>&1
    footer "$f" "1 GPU $s"
  done
fi

# Two workers of one "host" each on one GPU: two processes, two CUDA contexts, which the GPU
# time-slices (about 0.5 ms per small operation, measured on an H100). MPS (one shared context)
# removes that and leaves the runtime's own costs: it is used when present (KF_GPU_MPS=0: not).
pseudo_hosts() {  # OUTFILE PROGRAM ARGS...
  local f=$1 program=$2 H="127.0.0.1:1,127.0.0.2:1"
  shift 2
  bounded "$KFRUN" -q -np 2 -H "$H" -self 127.0.0.2 -port-range "$PSEUDO_PORTS" -timeout 5m \
    "$program" "$@" >/dev/null 2>&1 &
  local other=$!
  bounded "$KFRUN" -q -np 2 -H "$H" -self 127.0.0.1 -port-range "$PSEUDO_PORTS" -timeout 5m \
    "$program" "$@" >"$f" 2>&1
  wait "$other"
}
mps_started=
start_mps() {
  [[ "${KF_GPU_MPS:-1}" != 0 ]] && command -v nvidia-cuda-mps-control >/dev/null || return 0
  export CUDA_MPS_PIPE_DIRECTORY="$OUT/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$OUT/mps/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    mps_started=1
    log "(MPS daemon started: both workers share one CUDA context)"
  fi
}
stop_mps() {
  [[ -n "$mps_started" ]] || return 0
  echo quit | nvidia-cuda-mps-control
  mps_started=
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
trap stop_mps EXIT

if want 3b; then
  log "3b. two pseudo-hosts (127.0.0.1, 127.0.0.2) of one worker each, both on GPU 0"
  start_mps
  # Unmeasured: the first clients of a fresh MPS server ran 3-10x slower for a while (seen once).
  pseudo_hosts /dev/null "$KFBENCH" allreduce --device cuda -b 8 -e 1M -f 4 -n 20 -w 5 -strategy STAGED
  for s in NCCL_HIERARCHICAL STAGED STAGED:RING_RS_AG; do
    f="$OUT/kfbench_2hosts_1gpu_$(safe "$s").txt"
    pseudo_hosts "$f" "$KFBENCH" $BENCH_FLAGS -strategy "$s"
    footer "$f" "2 pseudo-hosts x 1 worker, 1 GPU${mps_started:+ (MPS)}, $s"
  done
  stop_mps
fi

if want 3c && [[ "${NGPU:-0}" -ge 2 ]]; then
  log "3c. kfrun -np 2..$NGPU on one host, one GPU per worker"
  for np in 2 4 8; do
    [[ $np -le $NGPU ]] || continue
    for s in $STRATEGIES; do
      f="$OUT/kfbench_${np}gpu_$(safe "$s").txt"
      bounded "$KFRUN" -q -np "$np" -port-range "$LOCAL_PORTS" -timeout 10m "$KFBENCH" $BENCH_FLAGS \
        -strategy "$s" >"$f" 2>&1
      footer "$f" "$np GPUs $s"
    done
  done
fi

if want 4a; then
  log "4a. host-buffer baseline: kfrun -np 2 kfbench allreduce (RING_RS_AG, host memory)"
  f="$OUT/kfbench_host_2ranks.txt"
  bounded "$KFRUN" -q -np 2 -port-range "$LOCAL_PORTS" -timeout 5m "$KFBENCH" allreduce -b 8 -e "$MAX" -f 4 \
    -n 20 -w 5 -strategy RING_RS_AG >"$f" 2>&1
  footer "$f" "host buffers, 2 ranks, RING_RS_AG"
  # The TCP path of 3b without the GPU: the same two pseudo-hosts on host memory.
  f="$OUT/kfbench_host_2hosts.txt"
  pseudo_hosts "$f" "$KFBENCH" allreduce -b 8 -e "$MAX" -f 4 -n 20 -w 5 -strategy RING_RS_AG
  footer "$f" "host buffers, 2 pseudo-hosts x 1 worker, RING_RS_AG"
fi

if want 4b; then
  log "4b. GPU training (kftrain -gpu): resnet50, batch 64, 20 steps, 1 worker per GPU;" \
    "one allreduce per tensor, then 25 MiB buckets"
  np=$(( NGPU >= 1 ? NGPU : 1 ))
  for s in NCCL NCCL_HIERARCHICAL STAGED; do
    for fusion in 0 26214400; do
      f="$OUT/kftrain_resnet50_${np}gpu_$(safe "$s")_fusion${fusion}.txt"
      bounded "$KFRUN" -q -np "$np" -port-range "$LOCAL_PORTS" -timeout 10m "$KFTRAIN" -gpu -gpu-strategy "$s" \
        -gpu-tf32 -model resnet50 -batch 64 -steps 20 -fusion "$fusion" >"$f" 2>&1
      # Medians over the steps after the first two (warm-up).
      steps=$(grep -oE 'step [0-9]+: .*' "$f" | awk '{ split($2, k, ":"); if (k[1] + 0 >= 2) print }')
      rate=$(grep -oE '[0-9.]+ samples/s' <<<"$steps" | cut -d' ' -f1 | median)
      compute=$(grep -oE 'gpu_compute_ms=[0-9.]+' <<<"$steps" | cut -d= -f2 | median)
      echo "kftrain $np GPU(s) $s, fusion $fusion B: $(grep -c . <<<"$steps") steps, median" \
        "${rate:-?} samples/s, GPU compute ${compute:-?} ms/step" | tee -a "$OUT/summary.txt"
    done
    # Correctness of the same path: every element of every gradient bucket checked (slow).
    f="$OUT/kftrain_resnet50_${np}gpu_$(safe "$s").verify.txt"
    bounded "$KFRUN" -q -np "$np" -port-range "$LOCAL_PORTS" -timeout 10m "$KFTRAIN" -gpu -gpu-strategy "$s" \
      -model resnet50 -batch 8 -steps 3 -verify >"$f" 2>&1 && echo "  verify: ok" | tee -a "$OUT/summary.txt" \
      || echo "  verify: FAILED (see $f)" | tee -a "$OUT/summary.txt"
  done
fi
if want 4c; then
  log "4c. elastic resize on this host (kftrain -gpu -verify, 1 -> 2 -> 1 workers; MPS when present)"
  start_mps
  for s in STAGED STAGED:RING_RS_AG NCCL_HIERARCHICAL; do
    f="$OUT/elastic_$(safe "$s").txt"
    bounded "$KFRUN" -w -timeout 120s -port-range "$ELASTIC_PORTS" -np 1 -H "127.0.0.1:$(( NGPU >= 2 ? NGPU : 2 ))" \
      -builtin-config-port "$((PORT_BASE + 2100))" "$KFTRAIN" -gpu -gpu-strategy "$s" -model resnet50 -batch 8 \
      -steps 12 -verify -policy scheduled_resize:schedule=4:2,8:1 >"$f" 2>&1
    code=$?
    # With one GPU, NCCL refuses the 2-rank communicator the resize asks for (both ranks on one
    # device): the run must then fail with NCCL's reason, not hang.
    echo "elastic $s: exit $code; $(grep -E 'cluster version [0-9]+: [0-9]+ workers' "$f" | sed -E \
      's/.*(cluster version [0-9]+: [0-9]+ workers).*/\1/' | paste -sd, -)$(grep -m1 -oE \
      'Duplicate GPU detected.*' "$f" | sed 's/^/; /')" | tee -a "$OUT/summary.txt"
  done
  stop_mps
fi

if want 4d; then
  OVERLAP_STEPS=${KF_GPU_OVERLAP_STEPS:-20}
  log "4d. overlap (kftrain -gpu --bucketing): resnet50 and vgg16, batch 64, $OVERLAP_STEPS steps;" \
    "medians over steps 2-$((OVERLAP_STEPS - 1))"
  np=$(( NGPU >= 1 ? NGPU : 1 ))
  csv="$OUT/overlap.csv"
  echo "model,workers,path,bucketing,fusion_bytes,steps,samples_per_s,gpu_compute_ms,gpu_comm_ms,gpu_exposed_comm_ms" >"$csv"
  overlap_row() {  # LOGFILE MODEL WORKERS PATH BUCKETING FUSION
    local steps rate row
    steps=$(grep -oE 'step [0-9]+: .*' "$1" | awk '{ split($2, k, ":"); if (k[1] + 0 >= 2) print }')
    value() { grep -oE "$1=[0-9.eE+-]+" <<<"$steps" | cut -d= -f2 | median; }
    rate=$(grep -oE '[0-9.]+ samples/s' <<<"$steps" | cut -d' ' -f1 | median)
    row="$2,$3,$4,$5,$6,$(grep -c . <<<"$steps"),${rate:-},$(value gpu_compute_ms),$(value gpu_comm_ms),$(value gpu_exposed_comm_ms)"
    echo "$row" >>"$csv"
    echo "overlap $row" | tee -a "$OUT/summary.txt"
  }
  # none: compute, then every allreduce (per tensor, and in 25 MiB buckets); ddp: 25 MiB buckets
  # (the first 1 MiB) launched as the backward pass fills them; kungfu: each tensor when ready.
  train=(-gpu-tf32 -batch 64 -steps "$OVERLAP_STEPS")
  for model in resnet50 vgg16; do
    for s in NCCL STAGED; do
      for mode in none:0 none:26214400 ddp:0 kungfu:0; do
        b=${mode%%:*} fusion=${mode#*:}
        f="$OUT/overlap_${model}_${np}gpu_$(safe "$s")_${b}_fusion${fusion}.txt"
        bounded "$KFRUN" -q -np "$np" -port-range "$LOCAL_PORTS" -timeout 10m "$KFTRAIN" -gpu \
          -gpu-strategy "$s" -model "$model" "${train[@]}" -fusion "$fusion" --bucketing "$b" >"$f" 2>&1
        overlap_row "$f" "$model" "$np" "$s" "$b" "$fusion"
      done
      for b in ddp kungfu; do
        f="$OUT/overlap_${model}_${np}gpu_$(safe "$s")_${b}.verify.txt"
        bounded "$KFRUN" -q -np "$np" -port-range "$LOCAL_PORTS" -timeout 10m "$KFTRAIN" -gpu \
          -gpu-strategy "$s" -model "$model" -batch 8 -steps 3 --bucketing "$b" -verify >"$f" 2>&1 \
          && echo "  verify $model $s $b: ok" | tee -a "$OUT/summary.txt" \
          || echo "  verify $model $s $b: FAILED (see $f)" | tee -a "$OUT/summary.txt"
      done
    done
  done
  # Two workers on the pseudo-hosts of 3b, sharing GPU 0 (under MPS when present), their STAGED
  # allreduces over TCP: a step whose communication outlasts its compute.
  start_mps
  for model in resnet50 vgg16; do
    for mode in none:26214400 ddp:0 kungfu:0; do
      b=${mode%%:*} fusion=${mode#*:}
      f="$OUT/overlap_${model}_2hosts_1gpu_STAGED_${b}_fusion${fusion}.txt"
      pseudo_hosts "$f" "$KFTRAIN" -gpu -gpu-strategy STAGED -model "$model" "${train[@]}" \
        -fusion "$fusion" --bucketing "$b"
      overlap_row "$f" "$model" 2 STAGED "$b" "$fusion"
    done
  done
  stop_mps
fi

if want 5; then
  log "5. sanitizers"
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [[ -x "$CS" ]]; then
    # API errors are not reported: NCCL probes kernels for other GPUs and a test asks for more
    # memory than there is on purpose; memcheck's own errors (bad device accesses, leaks) are.
    bounded "$CS" --tool memcheck --report-api-errors no --leak-check full --error-exitcode 3 \
      "$BUILD/tests/gpu_test" --gtest_filter="$MEMCHECK_TESTS" \
      >"$OUT/memcheck.txt" 2>&1
    echo "compute-sanitizer memcheck: exit $?, $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.txt")" \
      | tee -a "$OUT/summary.txt"
  else
    echo "compute-sanitizer: not found" | tee -a "$OUT/summary.txt"
  fi
  if [[ -n "${KF_GPU_ASAN_TEST:-}" ]]; then
    supp=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/lsan_gpu.supp
    # CUDA maps memory in ASan's shadow gap.
    ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=1 LSAN_OPTIONS="suppressions=$supp" \
      UBSAN_OPTIONS=print_stacktrace=1 bounded "$KF_GPU_ASAN_TEST" --gtest_filter='-GpuUnavailable.*' \
      >"$OUT/asan_gpu_test.txt" 2>&1
    echo "ASan+UBSan gpu_test: exit $?, $(grep -E '^\[  PASSED  \]' "$OUT/asan_gpu_test.txt")," \
      "$(grep -cE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$OUT/asan_gpu_test.txt") sanitizer reports" \
      | tee -a "$OUT/summary.txt"
  fi
fi
if want 6; then
  log "6. the Python package on CUDA memory (python/tests/test_gpu.py, $(python3 --version 2>&1))"
  SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  PKG="$BUILD/python"
  if ! PYTHONPATH="$PKG" python3 -c 'import kungfu' >/dev/null 2>&1; then
    # The build's extension module is for another Python (a bundle from a Debian build): build
    # kungfu._core for this one against the carried runtime (libkungfu_runtime.so).
    ext=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    pb=$(python3 -m pybind11 --includes 2>/dev/null || true)
    bounded c++ -O2 -std=c++20 -fPIC -shared -fvisibility=hidden -DFMT_SHARED -I"$SRC" \
      -I"$BUILD/include" -isystem "$pyinc" $pb "$SRC/python/src/core_module.cc" \
      "$SRC/python/src/policy_module.cc" -o "$PKG/kungfu/_core$ext" -L"$PKG/kungfu" \
      -lkungfu_runtime -Wl,-rpath,'$ORIGIN' >"$OUT/python_build.txt" 2>&1
    echo "kungfu._core for this Python: exit $?" | tee -a "$OUT/summary.txt"
  fi
  KFRUN="$KFRUN" KF_PYTHON=python3 KF_PYTHON_DIR="$PKG" PYTHONPATH="$PKG" bounded python3 -m pytest -rA \
    -v -p no:cacheprovider "$SRC/python/tests/test_gpu.py" >"$OUT/python_gpu.txt" 2>&1
  echo "python test_gpu.py: exit $?; $(tail -1 "$OUT/python_gpu.txt")" | tee -a "$OUT/summary.txt"
  grep -E 'PASSED|FAILED|SKIPPED' "$OUT/python_gpu.txt" | tee -a "$OUT/summary.txt"
fi
log "done: $OUT/summary.txt"
