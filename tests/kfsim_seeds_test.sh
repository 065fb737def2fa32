#!/usr/bin/env bash
# kfsim's seeds and worker processes: `seeds: N` / --seeds runs every arm N times into
# ARM/seed=S/ and summarizes each figure (mean, sd, 95% Student's t interval) in sweep.csv,
# variants.csv and summary.json; --jobs N gives byte-identical records to --jobs 1; bad values
# exit 2 naming their place.
#
#   tests/kfsim_seeds_test.sh KFSIM ROOT
set -uo pipefail
kfsim="$1"
root="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

expect_error() {  # name, expected stderr regex, kfsim args...
  local name="$1" pattern="$2"
  shift 2
  local err code
  err="$("$kfsim" "$@" --quiet --out "$work/err" 2>&1 >/dev/null)"
  code=$?
  if [[ $code -ne 2 ]]; then
    fail "$name: exit $code, want 2 ($err)"
  elif ! grep -Eq -- "$pattern" <<<"$err"; then
    fail "$name: message '$err' does not match /$pattern/"
  else
    echo "ok   $name: $err"
  fi
}

# Every record of two output trees equal, perf.json (wall-clock figures) aside.
same_records() {  # name, dir1, dir2
  local a b
  a="$(cd "$2" && find . -type f ! -name perf.json | LC_ALL=C sort | xargs sha256sum)"
  b="$(cd "$3" && find . -type f ! -name perf.json | LC_ALL=C sort | xargs sha256sum)"
  if [[ -z "$a" || "$a" != "$b" ]]; then
    fail "$1: records differ"
    diff <(echo "$a") <(echo "$b") | head -20
  else
    echo "ok   $1: $(wc -l <<<"$a") records byte-identical"
  fi
}

cat >"$work/zero.yaml" <<'YAML'
steps: 2
seeds: 0
topology: {kind: star, hosts: 2}
YAML
cat >"$work/variants.yaml" <<'YAML'
steps: 3
seeds: 3
world: flow
topology: {kind: star, hosts: 2, workers_per_host: 2}
workload: {model: resnet56, device: v100, batch_per_worker: 16}
variants:
  ring: {strategy: RING}
  star: {strategy: STAR}
YAML

expect_error "seeds: 0" "zero.yaml:2:8: seeds: must be at least 1, got 0" "$work/zero.yaml"
expect_error "--seeds 0" "--seeds" "$work/variants.yaml" --seeds 0
expect_error "--jobs 0" "--jobs" "$work/variants.yaml" --jobs 0
expect_error "--jobs x" "--jobs" "$work/variants.yaml" --jobs x
expect_error "a variant's seeds" "variants.ring.seeds: a variant cannot set 'seeds'" \
  "$work/variants.yaml" --set variants.ring.seeds=2
expect_error "--compare with seeds" "--compare runs one seed" "$work/variants.yaml" --compare ns3,flow

# Variants at 3 seeds in the flow world, one process and two.
"$kfsim" "$work/variants.yaml" -q --out "$work/v1" || fail "variants --jobs 1 exited $?"
"$kfsim" "$work/variants.yaml" -q --jobs 2 --out "$work/v2" || fail "variants --jobs 2 exited $?"
same_records "variants, --jobs 2 = --jobs 1" "$work/v1" "$work/v2"
for d in ring/seed=1 ring/seed=2 ring/seed=3 star/seed=3; do
  [[ -f "$work/v1/$d/summary.json" ]] || fail "no $d/summary.json"
done

# A sweep in the ns-3 world at 2 seeds (--seeds), and at one seed: the same records either way.
small=(--world ns3 --set workload.model=resnet56 --set steps=2 --set 'sweep.values=[STAR,RING]')
"$kfsim" "$root/scenarios/strategies.yaml" "${small[@]}" --seeds 2 -q --out "$work/s1" ||
  fail "sweep --jobs 1 exited $?"
"$kfsim" "$root/scenarios/strategies.yaml" "${small[@]}" --seeds 2 -q --jobs 2 --out "$work/s2" ||
  fail "sweep --jobs 2 exited $?"
same_records "ns-3 sweep at 2 seeds, --jobs 2 = --jobs 1" "$work/s1" "$work/s2"
"$kfsim" "$root/scenarios/strategies.yaml" "${small[@]}" -q --out "$work/o1" || fail "one seed"
"$kfsim" "$root/scenarios/strategies.yaml" "${small[@]}" -q --jobs 2 --out "$work/o2" ||
  fail "one seed, --jobs 2"
same_records "ns-3 sweep at 1 seed, --jobs 2 = --jobs 1" "$work/o1" "$work/o2"
[[ ! -e "$work/o1/strategy=STAR/seed=1" ]] || fail "one seed made a seed=S directory"
[[ ! -e "$work/o1/summary.json" ]] || fail "one seed made a sweep summary.json"

# The tables against the runs' own summaries, with t(0.975, n - 1) from a printed table.
/usr/bin/python3 - "$work" <<'PY' || failures=$((failures + 1))
import csv, json, math, sys
from pathlib import Path
work = Path(sys.argv[1])
T = {1: 12.7062047, 2: 4.3026527}  # t(0.975, dof)

def check(rows, arm_dir, seeds, name):
    for row in rows:
        runs = [json.loads((work / arm_dir(row) / f"seed={s}" / "summary.json").read_text())
                for s in seeds]
        xs = [r["throughput_samples_per_s"] for r in runs]
        n = len(xs)
        mean = sum(xs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
        half = T[n - 1] * sd / math.sqrt(n)
        got = [float(row["throughput_samples_per_s" + s])
               for s in ("", "_sd", "_ci95_low", "_ci95_high")]
        want = [mean, sd, mean - half, mean + half]
        if int(row["seeds"]) != n or any(abs(g - w) > 1e-5 * max(1, abs(w)) for g, w in zip(got, want)):
            print(f"FAIL {name} {row}: got {got}, want {want}")
            sys.exit(1)
    print(f"ok   {name}: mean, sd and 95% interval match the runs")

with open(work / "s1" / "sweep.csv") as f:
    check(list(csv.DictReader(f)), lambda r: f"s1/strategy={r['value']}", [1, 2], "sweep.csv")
with open(work / "v1" / "variants.csv") as f:
    check(list(csv.DictReader(f)), lambda r: f"v1/{r['variant']}", [1, 2, 3], "variants.csv")
c = json.loads((work / "v1" / "summary.json").read_text())
assert c["seeds"] == 3 and len(c["seeds_highest_efficiency"]) == 3, c
assert c["highest_efficiency_seeds_agree"] == c["seeds_highest_efficiency"].count(c["highest_efficiency"])
assert c["variants"][0]["figures"]["throughput_samples_per_s"]["n"] == 3
print("ok   summary.json: claims and agreement")
PY

if [[ $failures -ne 0 ]]; then
  echo "kfsim_seeds: $failures failure(s)"
  exit 1
fi
echo "kfsim_seeds: all passed"
