#!/usr/bin/env bash
# ./kf bench torch_sim: what a workload.torch step costs kfsim beyond the model's own math. For
# each task module and batch, alternating ROUNDS times: the step through kfsim's embedded Python
# (torch_sim_bench: C++ gathers the rows, numpy views of its memory, parameters in, forward,
# loss, backward, gradient out) and the same forward and backward in plain Python
# (torch_sim_ref.py). The overhead is the difference of the medians (the round trip per worker
# per step; target < 1 ms). Results: OUT/results.jsonl, OUT/summary.csv and a table on stdout.
#
#   bench/torch_sim.sh BUILD_DIR [--out DIR] [--rounds R] [--reps N]
set -euo pipefail

build="$(cd "$1" && pwd)"
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/out/bench-torch-sim" rounds=3 reps=200
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    *) echo "bench/torch_sim.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
bench="$build/bench/torch_sim_bench"
[[ -x "$bench" ]] || { echo "bench/torch_sim.sh: $bench is not built (KF_WITH_TORCH)" >&2; exit 3; }
mkdir -p "$out"
: >"$out/results.jsonl"
export PYTHONPATH="$build/python" KF_PYTHON_DIR="$build/python"

# module | batch | reps (the CNN's steps are 100x the tiny model's)
cases=(
  "$root/tests/torch/tiny_task.py|8|$reps"
  "$root/tests/torch/tiny_task.py|64|$reps"
  "$root/examples/fashion_cnn.py|32|$((reps / 4 > 10 ? reps / 4 : 10))"
)
if [[ ! -d /usr/share/datasets/fashion-mnist && -z "${KF_FASHION_MNIST:-}" ]]; then
  echo "[bench torch_sim] no Fashion-MNIST (dataset-fashion-mnist): the CNN is left out" >&2
  unset 'cases[2]'
fi
for ((r = 1; r <= rounds; ++r)); do
  for c in "${cases[@]}"; do
    IFS='|' read -r module batch n <<<"$c"
    echo "[bench torch_sim] round $r: $(basename "$module") batch $batch" >&2
    "$bench" --module "$module" --batch "$batch" --reps "$n" | sed "s/^{/{\"round\": $r, /" >>"$out/results.jsonl"
    /usr/bin/python3 "$root/bench/torch_sim_ref.py" --module "$module" --batch "$batch" --reps "$n" |
      sed "s/^{/{\"round\": $r, /" >>"$out/results.jsonl"
  done
done

/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
rows = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines() if l.strip()]
keys = sorted({(Path(r["module"]).name, r["batch"], r["parameters"]) for r in rows})
lines = ["module,batch,parameters,python_ms,embedded_ms,overhead_ms,overhead_pct"]
print(f"{'module':<16} {'batch':>5} {'params':>8} {'python ms':>10} {'embedded ms':>12} {'overhead ms':>12}")
for m, b, p in keys:
    med = lambda side: statistics.median(r["median_ms"] for r in rows if Path(r["module"]).name == m
                                         and r["batch"] == b and r["side"] == side)
    py, em = med("python"), med("embedded")
    lines.append(f"{m},{b},{p},{py:.4f},{em:.4f},{em - py:.4f},{100 * (em - py) / py:.1f}")
    print(f"{m:<16} {b:>5} {p:>8} {py:>10.4f} {em:>12.4f} {em - py:>12.4f}")
(out / "summary.csv").write_text("\n".join(lines) + "\n")
PY
echo "[bench torch_sim] $out/summary.csv" >&2
