#!/usr/bin/env bash
# kfsim --slurm on a one-node Slurm cluster that this test starts and stops itself
# (tests/slurm_cluster.sh: munged, slurmctld and slurmd under a temporary directory): a sweep of
# two values x 3 seeds submitted as one job array, waited for and collected, gives the same
# tables and run summaries as the same experiment run locally; --no-wait then --collect gives
# them too; a run whose records are gone is named by --collect (exit 1), and submitting again
# runs only that one. Skipped (77) where the cluster cannot start (not root, Slurm missing).
#
#   tests/kfsim_slurm_test.sh KFSIM ROOT
set -uo pipefail
kfsim="$(realpath "$1")"
root="$2"
# shellcheck source=tests/slurm_cluster.sh
source "$root/tests/slurm_cluster.sh"
work="$(mktemp -d)"
trap 'slurm_stop; rm -rf "$work"' EXIT
rc=0
slurm_start "$work" || rc=$?
if ((rc == 77)); then
  echo "skipped: cannot start a one-node Slurm cluster here: $SLURM_CLUSTER_SKIP_REASON"
  exit 77
fi
((rc == 0)) || exit "$rc"
echo "ok   a one-node Slurm cluster up in ${SLURM_CLUSTER_START_S} s"

failures=0
fail() {
  echo "FAIL $*"
  failures=$((failures + 1))
}

# The merged tables and every run's summary equal between two experiment directories.
same_tables() {  # name, dir1, dir2
  local a b
  a="$(cd "$2" && find . -name summary.json -o -name sweep.csv | LC_ALL=C sort | xargs sha256sum)"
  b="$(cd "$3" && find . -name summary.json -o -name sweep.csv | LC_ALL=C sort | xargs sha256sum)"
  if [[ $(wc -l <<<"$a") -ne 8 || "$a" != "$b" ]]; then
    fail "$1: tables differ"
    diff <(echo "$a") <(echo "$b") | head -20
  else
    echo "ok   $1: sweep.csv, summary.json and 6 runs' summaries identical"
  fi
}

wait_gone() {  # job id: until squeue no longer lists it (bounded)
  for _ in $(seq 240); do
    [[ -z "$(squeue --noheader --jobs "$1" --format %i 2>/dev/null)" ]] && return 0
    sleep 0.5
  done
  return 1
}

exp=("$root/scenarios/strategies.yaml" --world flow --set steps=3 --set 'sweep.values=[STAR,RING]'
  --seeds 3)
"$kfsim" "${exp[@]}" -q --out "$work/local" || fail "the local run exited $?"

start=$SECONDS
said="$("$kfsim" "${exp[@]}" --out "$work/slurm" --slurm -- --time=5 2>&1)"
code=$?
echo "$said" | sed 's/^/     | /'
if [[ $code -ne 0 ]]; then
  fail "--slurm exited $code"
  tail -20 "$SLURM_CLUSTER_DIR/slurmctld.log"
fi
grep -q "submitted Slurm job [0-9]*: 6 runs (array 0-5)" <<<"$said" || fail "--slurm did not submit 6 runs"
echo "ok   --slurm: 6 runs as one array in $((SECONDS - start)) s"
same_tables "--slurm = local" "$work/local" "$work/slurm"
[[ $(find "$work/slurm/slurm" -name '*_*.out' | wc -l) -eq 6 ]] || fail "not 6 task logs"

said="$("$kfsim" "${exp[@]}" --out "$work/nw" --slurm --no-wait 2>&1)" || fail "--no-wait exited $?"
job="$(sed -n 's/^submitted Slurm job \([0-9]*\):.*/\1/p' <<<"$said")"
grep -q "kfsim --collect $work/nw" <<<"$said" || fail "--no-wait does not say how to collect: $said"
[[ -n "$job" ]] && wait_gone "$job" || fail "job '$job' did not leave the queue"
"$kfsim" --collect "$work/nw" -q || fail "--collect exited $?"
same_tables "--no-wait, then --collect = local" "$work/local" "$work/nw"

rm "$work/nw/strategy=RING/seed=2/run.json"
err="$("$kfsim" --collect "$work/nw" -q 2>&1)"
code=$?
if [[ $code -eq 1 ]] && grep -q "run 4: RING, seed 2: incomplete records (Slurm log: $work/nw/slurm/${job}_4.out)" <<<"$err"; then
  echo "ok   --collect names the incomplete run and its Slurm log"
else
  fail "--collect with a run missing: exit $code: $err"
fi
said="$("$kfsim" "${exp[@]}" --out "$work/nw" --slurm 2>&1)" || fail "re-submitting exited $?"
if grep -q "5 of 6 runs complete from before; running 1" <<<"$said" &&
  grep -q "submitted Slurm job [0-9]*: 1 run (array 4)" <<<"$said"; then
  echo "ok   submitting again runs only the missing run"
else
  fail "re-submission: $said"
fi
same_tables "after the re-submission = local" "$work/local" "$work/nw"

err="$("$kfsim" "${exp[@]}" -q --out "$work/bad" --slurm -- --partition=nope 2>&1)"
code=$?
[[ $code -eq 1 ]] && grep -q "sbatch refused the job array" <<<"$err" &&
  echo "ok   a job sbatch refuses: $err" || fail "a bad partition: exit $code: $err"

if [[ $failures -ne 0 ]]; then
  echo "kfsim_slurm: $failures failure(s)"
  exit 1
fi
echo "kfsim_slurm: all passed"
