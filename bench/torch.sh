#!/usr/bin/env bash
# ./kf bench torch: the Python package against its peers, side by side in one run.
#   1. DDP training throughput, the same script (bench/torch_ddp.py: ResNet-18 on synthetic
#      32x32 images, or --model mlp) on backend "kungfu" and on "gloo", 4 processes on this host,
#      alternated ROUNDS times, beside "none" (the same DDP with no gradient traffic: the ceiling);
#   2. allreduce from Python (bench/py_allreduce.py, kungfu.allreduce on numpy) against the same
#      allreduce from C++ (kfbench), 8 B and 64 MiB, alternated ROUNDS times.
# Results: OUT/ddp.jsonl, OUT/allreduce.jsonl, and a table on stdout.
#
#   bench/torch.sh BUILD_DIR [--out DIR] [--np N] [--rounds R] [--steps S] [--model resnet18|mlp]
set -euo pipefail

build="$(cd "$1" && pwd)"
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/out/bench-torch" np=4 rounds=3 steps=20 model=resnet18
while (($#)); do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    *) echo "bench/torch.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -d "$build/python/kungfu" ]] || { echo "bench/torch.sh: $build/python/kungfu is not built" >&2; exit 3; }
mkdir -p "$out"
: >"$out/ddp.jsonl"
: >"$out/allreduce.jsonl"
export PYTHONPATH="$build/python"
kfrun=("$build/apps/kfrun" -q -v=false)

for ((r = 1; r <= rounds; ++r)); do
  for backend in kungfu gloo none; do
    echo "[bench torch] round $r: DDP $model on $backend, $np processes" >&2
    "${kfrun[@]}" -np "$np" /usr/bin/python3 "$root/bench/torch_ddp.py" "$backend" \
      --model "$model" --steps "$steps" | grep '^{' | sed "s/^{/{\"round\":$r,/" >>"$out/ddp.jsonl"
  done
  for bytes in 8 67108864; do
    iters=$((bytes > 1048576 ? 40 : 400))
    echo "[bench torch] round $r: allreduce $bytes B, C++ (kfbench) and Python" >&2
    "${kfrun[@]}" -np "$np" "$build/apps/kfbench" allreduce -b "$bytes" -e "$bytes" -n "$iters" \
      -w 10 --json | /usr/bin/python3 -c '
import json, sys
d = json.loads(sys.stdin.read())
row = d["rows"][0]
print(json.dumps({"round": int(sys.argv[1]), "side": "c++", "bytes": row["bytes"],
                  "time_us": row["time_us"], "p50_us": row["p50_us"]}))' "$r" >>"$out/allreduce.jsonl"
    "${kfrun[@]}" -np "$np" /usr/bin/python3 "$root/bench/py_allreduce.py" --sizes "$bytes" \
      -n "$iters" -w 10 | grep '^{' |
      sed "s/^{/{\"round\":$r,\"side\":\"python\",/" >>"$out/allreduce.jsonl"
  done
done

/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
ddp = [json.loads(l) for l in (out / "ddp.jsonl").read_text().splitlines() if l.strip()]
ar = [json.loads(l) for l in (out / "allreduce.jsonl").read_text().splitlines() if l.strip()]
print(f"\nDDP {ddp[0]['model']} ({ddp[0]['parameters']:,} parameters), {ddp[0]['ranks']} processes, "
      f"batch {ddp[0]['batch_per_worker']}/worker: samples/s per round")
for b in ("kungfu", "gloo", "none"):
    v = [d["samples_per_s"] for d in ddp if d["backend"] == b]
    print(f"  {b:<7} " + "  ".join(f"{x:8.1f}" for x in v) + f"   median {statistics.median(v):8.1f}")
ratios = [k["samples_per_s"] / g["samples_per_s"] for k, g in
          zip([d for d in ddp if d["backend"] == "kungfu"], [d for d in ddp if d["backend"] == "gloo"])]
print("  kungfu / gloo per round: " + "  ".join(f"{x:.2f}" for x in ratios) +
      f"   median {statistics.median(ratios):.2f}")
ceiling = [n["samples_per_s"] / g["samples_per_s"] for n, g in
           zip([d for d in ddp if d["backend"] == "none"], [d for d in ddp if d["backend"] == "gloo"])]
print("  none / gloo per round (the most any backend can gain here): " +
      "  ".join(f"{x:.2f}" for x in ceiling) + f"   median {statistics.median(ceiling):.2f}")
print("\nallreduce, C++ (kfbench) vs Python (kungfu.allreduce), per round")
for size in sorted({a["bytes"] for a in ar}):
    cpp = [a for a in ar if a["bytes"] == size and a["side"] == "c++"]
    py = [a for a in ar if a["bytes"] == size and a["side"] == "python"]
    key = "p50_us" if size < 1024 else "time_us"
    line = "  ".join(f"{c[key]:.1f}/{p[key]:.1f}" for c, p in zip(cpp, py))
    extra = [p[key] - c[key] for c, p in zip(cpp, py)]
    rel = [p[key] / c[key] - 1 for c, p in zip(cpp, py)]
    print(f"  {size:>9} B {key:<8} c++/python us: {line}   python extra: median "
          f"{statistics.median(extra):+.1f} us ({100 * statistics.median(rel):+.1f}%)")
PY
