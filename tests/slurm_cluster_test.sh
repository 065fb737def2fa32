#!/usr/bin/env bash
# The one-node Slurm harness (tests/slurm_cluster.sh) works, the way kfsim --slurm uses Slurm:
#   1. slurm_start brings munged, slurmctld and slurmd up and sinfo shows the node idle;
#   2. `sbatch --parsable --array=0-2` runs three tasks: polling `squeue -h -j JOBID` until it
#      prints nothing ends, each task's --output file says "task I" and the task ran in sbatch's
#      working directory;
#   3. without accounting a failed task (exit 3) is seen two ways: `scontrol -o show job JOBID`
#      says JobState=FAILED ExitCode=3:0 for it (COMPLETED 0:0 for its sibling), and the result
#      file it was to write is missing (its --output file exists: Slurm makes it at the start);
#   4. slurm_stop, with a task still running, leaves nothing: no daemon, no job process, no
#      listener on the leased ports; a second slurm_stop is a no-op.
# Skips (77) where the cluster cannot start (not root, Slurm or munge missing, a daemon fails).
#   slurm_cluster_test.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$HERE/slurm_cluster.sh"
WORK="$(mktemp -d)"
cleanup() {
  slurm_stop || true
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*"
  local f
  for f in slurmctld.log slurmd.log munged.log; do
    [[ -r ${SLURM_CLUSTER_DIR:-/nonexistent}/$f ]] || continue
    echo "---- last lines of $f"
    tail -n 15 "$SLURM_CLUSTER_DIR/$f"
  done
  exit 1
}

# Whole seconds and hundredths since NS (date +%s%N).
since() { awk -v a="$1" -v b="$(date +%s%N)" 'BEGIN {printf "%.2f", (b - a) / 1e9}'; }

rc=0
slurm_start "$WORK" || rc=$?
if ((rc == 77)); then
  echo "skipped: cannot start a one-node Slurm cluster here: $SLURM_CLUSTER_SKIP_REASON"
  exit 77
fi
((rc == 0)) || fail "slurm_start returned $rc"
[[ $SLURM_CONF == "$WORK/slurm-cluster/slurm.conf" ]] || fail "SLURM_CONF is '$SLURM_CONF'"
[[ $(sinfo -h -n localhost -o %T) == idle ]] || fail "sinfo: node not idle"
echo "started in $SLURM_CLUSTER_START_S s (ports $SLURM_CLUSTER_PORT_BASE.., $SLURM_CLUSTER_CPUS CPUs)"

# Polls `squeue -h -j JOBID` (as kfsim does) until it prints nothing, up to 60 s. An unknown job
# id (purged after MinJobAge) makes squeue fail with "Invalid job id": that counts as gone too;
# any other failure (no controller) does not.
wait_gone() {
  local job=$1 out err i
  for ((i = 0; i < 300; i++)); do
    if out=$(squeue -h -j "$job" 2>"$WORK/squeue.err"); then
      [[ -z $out ]] && return 0
    else
      err=$(cat "$WORK/squeue.err")
      [[ $err == *"Invalid job id"* ]] && return 0
    fi
    sleep 0.2
  done
  fail "job $job still in squeue after 60 s: $out ${err:-}"
}

# ---- 2. an array of three tasks ----
mkdir "$WORK/submit"
cd "$WORK/submit"
t0=$(date +%s%N)
# shellcheck disable=SC2016  # expanded by the task
job=$(sbatch --parsable --array=0-2 --output="$WORK/out_%a.txt" \
  --wrap 'echo task $SLURM_ARRAY_TASK_ID; echo "cwd $(pwd)"')
job=${job%%;*}  # --parsable prints JOBID or JOBID;CLUSTER
[[ $job =~ ^[0-9]+$ ]] || fail "sbatch --parsable printed '$job'"
wait_gone "$job"
echo "array of 3 tasks done in $(since "$t0") s"
for i in 0 1 2; do
  f=$WORK/out_$i.txt
  [[ -r $f ]] || fail "no output $f"
  [[ $(sed -n 1p "$f") == "task $i" ]] || fail "$f says '$(cat "$f")', not 'task $i'"
  [[ $(sed -n 2p "$f") == "cwd $WORK/submit" ]] || fail "task $i ran in '$(sed -n 2p "$f")'"
done

# ---- 3. a failing task, seen without accounting ----
t0=$(date +%s%N)
job=$(sbatch --parsable --array=0-1 --output="$WORK/fail_%a.txt" \
  --wrap "[ \$SLURM_ARRAY_TASK_ID = 1 ] && exit 3; echo ok >$WORK/result_\$SLURM_ARRAY_TASK_ID")
job=${job%%;*}
wait_gone "$job"
echo "array of 2 tasks (one fails) done in $(since "$t0") s"
# One line per task: "JobId=N ArrayJobId=J ArrayTaskId=I ... JobState=S ... ExitCode=E:SIG ...".
shown=$(scontrol -o show job "$job") || fail "scontrol show job $job failed"
task_field() {  # TASK FIELD: FIELD's value on TASK's line
  awk -v t="ArrayTaskId=$1" -v k="$2=" '{
    hit = 0; for (i = 1; i <= NF; i++) if ($i == t) hit = 1
    if (hit) for (i = 1; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1)
  }' <<<"$shown"
}
[[ $(task_field 1 JobState) == FAILED ]] || fail "task 1: JobState '$(task_field 1 JobState)'; $shown"
[[ $(task_field 1 ExitCode) == 3:0 ]] || fail "task 1: ExitCode '$(task_field 1 ExitCode)'; $shown"
[[ $(task_field 0 JobState) == COMPLETED ]] || fail "task 0: JobState '$(task_field 0 JobState)'"
[[ $(task_field 0 ExitCode) == 0:0 ]] || fail "task 0: ExitCode '$(task_field 0 ExitCode)'"
[[ -r $WORK/result_0 ]] || fail "task 0 wrote no result"
[[ ! -e $WORK/result_1 ]] || fail "task 1 (exit 3) wrote a result"
[[ -e $WORK/fail_1.txt ]] || fail "the failed task has no output file (Slurm makes it at the start)"

# ---- 4. stop with a task still running: nothing may be left ----
job=$(sbatch --parsable --output="$WORK/sleeper.txt" --wrap "echo \$\$ >$WORK/sleeper.pid; exec sleep 300")
job=${job%%;*}
for ((i = 0; i < 150; i++)); do
  [[ -s $WORK/sleeper.pid ]] && break
  sleep 0.2
done
[[ -s $WORK/sleeper.pid ]] || fail "the sleeping job did not start"
sleeper=$(<"$WORK/sleeper.pid")
dir=$SLURM_CLUSTER_DIR
daemons=$(cat "$dir/munged.pid" "$dir/slurmctld.pid" "$dir/slurmd.pid")
base=$SLURM_CLUSTER_PORT_BASE
t0=$(date +%s%N)
slurm_stop || fail "slurm_stop reports survivors"
echo "stopped (one running task cancelled) in $(since "$t0") s"
slurm_stop || fail "a second slurm_stop failed"
[[ -z ${SLURM_CONF:-} ]] || fail "SLURM_CONF still set after slurm_stop"
survivors=$(slurm_leftovers "$dir")
[[ -z $survivors ]] || fail "processes of the cluster left: $survivors"
for pid in $daemons $sleeper; do
  if [[ -d /proc/$pid ]] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
    fail "pid $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)) still runs"
  fi
done
# By name too: nothing whose command line names this test's directory.
if pgrep -a -f -- "$WORK/" | grep -v "^$$ "; then fail "a process naming $WORK is left"; fi
if ss -Htln "sport >= :$base and sport <= :$((base + 63))" 2>/dev/null | grep -q .; then
  fail "something still listens on $base-$((base + 63))"
fi
echo "PASS"
