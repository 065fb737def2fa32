#!/usr/bin/env bash
# kfsim's seeds and worker processes: `seeds: N` / --seeds runs every arm N times into
# ARM/seed=S/ and summarizes each figure (mean, sd, 95% Student's t interval) in sweep.csv,
# variants.csv and summary.json; --jobs N gives byte-identical records to --jobs 1; an experiment
# killed mid-way and run again runs only what is missing, and a changed scenario runs everything
# again; --collect merges; bad values exit 2 naming their place.
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

# Resumable: killed (SIGKILL, no clean-up) once two runs are complete, then run again into the
# same directory: the finished runs are not run again and the records equal an uninterrupted run.
slow=(--world ns3 --set workload.model=resnet56 --set steps=25 --set 'sweep.values=[STAR,RING,BINARY_TREE_STAR]' --seeds 2)
"$kfsim" "$root/scenarios/strategies.yaml" "${slow[@]}" -q --out "$work/r0" || fail "uninterrupted"
"$kfsim" "$root/scenarios/strategies.yaml" "${slow[@]}" -q --out "$work/r1" &
pid=$!
for _ in $(seq 600); do
  [[ $(find "$work/r1" -name run.json 2>/dev/null | wc -l) -ge 2 ]] && break
  sleep 0.05
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
done_before="$(find "$work/r1" -name run.json | LC_ALL=C sort)"
if [[ $(wc -l <<<"$done_before") -lt 2 || $(wc -l <<<"$done_before") -ge 6 ]]; then
  fail "resume: the kill came when $(wc -l <<<"$done_before") of 6 runs were complete"
fi
stamps() { for m in $done_before; do stat -c '%n %i %Y' "$m" "$(dirname "$m")/summary.json"; done; }
before="$(stamps)"
out="$("$kfsim" "$root/scenarios/strategies.yaml" "${slow[@]}" --out "$work/r1" 2>&1)" ||
  fail "resume exited $?"
n_done=$(wc -l <<<"$done_before")
if grep -q "$n_done of 6 runs complete from before; running $((6 - n_done))" <<<"$out" &&
  [[ "$(stamps)" == "$before" ]]; then
  echo "ok   resume: $n_done finished runs kept, $((6 - n_done)) run"
else
  fail "resume: finished runs were run again or not reported ($(head -1 <<<"$out"))"
fi
same_records "resumed = uninterrupted" "$work/r0" "$work/r1"
out="$("$kfsim" "$root/scenarios/strategies.yaml" "${slow[@]}" --set steps=24 -q --out "$work/r1" 2>&1)" ||
  fail "changed scenario exited $?"
if [[ -z "$out" ]] && ! cmp -s "$work/r0/strategy=STAR/seed=1/run.json" "$work/r1/strategy=STAR/seed=1/run.json"; then
  echo "ok   a changed override runs every run again"
else
  fail "a changed override kept old records: $out"
fi

# --collect merges the same tables; it names what is missing (exit 1) and refuses what is no
# experiment (exit 2).
cp -r "$work/r0" "$work/c" && rm "$work/c/sweep.csv" "$work/c/summary.json"
"$kfsim" --collect "$work/c" -q || fail "--collect exited $?"
cmp -s "$work/r0/sweep.csv" "$work/c/sweep.csv" && cmp -s "$work/r0/summary.json" "$work/c/summary.json" &&
  echo "ok   --collect: sweep.csv and summary.json as the run wrote them" || fail "--collect differs"
rm "$work/c/strategy=RING/seed=2/run.json"
err="$("$kfsim" --collect "$work/c" -q 2>&1)"
code=$?
[[ $code -eq 1 ]] && grep -q "run 3: RING, seed 2: incomplete records" <<<"$err" &&
  echo "ok   --collect names a missing run: $(sed -n 2p <<<"$err")" ||
  fail "--collect with a missing run: exit $code, $err"
expect_collect_error() {  # name, pattern, dir
  local err code
  err="$("$kfsim" --collect "$3" 2>&1)"
  code=$?
  [[ $code -eq 2 ]] && grep -Eq -- "$2" <<<"$err" && echo "ok   $1: $err" || fail "$1: exit $code, $err"
}
expect_collect_error "--collect on no experiment" "holds no experiment: .*experiment.json is missing" "$work"
expect_collect_error "--collect on no directory" "is not a directory" "$work/nothing"
echo '{"kfsim_experiment": 1}' >"$work/c/experiment.json"
expect_collect_error "--collect on a broken manifest" "experiment.json: .*file" "$work/c"
err="$(PATH=/nonexistent "$kfsim" "$work/variants.yaml" --slurm -q --out "$work/err" 2>&1)"
code=$?
[[ $code -eq 2 ]] && grep -q -- "--slurm needs Slurm's sbatch on PATH" <<<"$err" &&
  echo "ok   --slurm without sbatch: $err" || fail "--slurm without sbatch: exit $code, $err"
expect_error "sbatch options without --slurm" "need --slurm" "$work/variants.yaml" -- --time=5

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
