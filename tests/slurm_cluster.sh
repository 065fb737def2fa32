# shellcheck shell=bash
# shellcheck disable=SC2034  # SLURM_CLUSTER_* are set for the caller
# A throw-away ONE-NODE Slurm cluster on this machine, for tests. Source it (bash), then:
#
#   source tests/slurm_cluster.sh
#   work=$(mktemp -d)
#   trap 'slurm_stop || true; rm -rf "$work"' EXIT   # `|| true`: see slurm_stop, under set -e
#   rc=0; slurm_start "$work" || rc=$?
#   if ((rc == 77)); then
#     echo "skipped: cannot start a one-node Slurm cluster here: $SLURM_CLUSTER_SKIP_REASON"; exit 77
#   fi
#   ((rc == 0)) || exit "$rc"
#   jobid=$(sbatch --parsable --array=0-2 --output="$work/out_%a.txt" job.sh)   # this cluster
#
# slurm_start WORKDIR
#   Starts munged, slurmctld and slurmd with every file under WORKDIR/slurm-cluster (removed and
#   made afresh; nothing else in WORKDIR is touched): a generated slurm.conf, a munge key made
#   for this cluster, pid, log, state and spool files. Never reads or writes /etc/slurm,
#   /etc/munge, /run/munge or /var/*, never talks to a system-wide daemon. Ports: a block of 64
#   from tests/port_lease.sh (SlurmctldPort = base, SlurmdPort = base + 1, SrunPortRange = the
#   other 62), held by the calling shell until it exits, so concurrent tests never collide.
#   Returns 0 once `sinfo` shows the node idle (bounded: SLURM_CLUSTER_START_TIMEOUT, default
#   30 s), with, in the calling shell:
#     SLURM_CONF                exported: sbatch/squeue/sinfo/scancel/scontrol run from here or
#                               from any child (kfsim --slurm) use this cluster, and so do the
#                               jobs (Slurm puts SLURM_CONF into every job's environment)
#     SLURM_CLUSTER_DIR         WORKDIR/slurm-cluster (logs: slurmctld.log, slurmd.log, munged.log)
#     SLURM_CLUSTER_NODE        localhost (NodeAddr 127.0.0.1)
#     SLURM_CLUSTER_PARTITION   local (the default partition)
#     SLURM_CLUSTER_CPUS        $(nproc): CPUs of the node; a task takes 1 unless it asks more
#     SLURM_CLUSTER_PORT_BASE   the leased block's first port
#     SLURM_CLUSTER_START_S     seconds the start took
#   PORT_BASE is left as the caller had it (the lease is taken under another name).
#   Returns 77 with "slurm_cluster: cannot start ...: REASON" on stderr and REASON in
#   SLURM_CLUSTER_SKIP_REASON when the cluster cannot run here: not root, a binary missing
#   (slurmctld, slurmd, munged, sbatch, squeue, sinfo, scancel, scontrol, setsid), or a daemon that
#   does not come up (its log's fatal line is the reason); whatever it had started is stopped
#   first. Returns 1 on misuse (no WORKDIR, a cluster already running in this shell). Every
#   port block taken: port_lease.sh's contract, the shell exits 1.
#
# slurm_stop
#   Cancels every job of the cluster (scancel, bounded), stops slurmd, slurmctld and munged (TERM,
#   KILL after 10 s each), then kills whatever of the cluster is left: any process whose
#   environment carries this cluster's marker (the daemons and their children: slurmscriptd,
#   slurmstepd), any process in a slurmstepd's session, and any job process (SLURM_CONF of this
#   cluster and SLURM_JOB_ID in its environment), never the calling shell or its ancestors.
#   Returns 0 when nothing is left, 1 (naming the survivors on stderr) otherwise. Safe to call
#   twice, and without a slurm_start; install it with `trap slurm_stop EXIT` (it never exits the
#   shell, so the script's exit status stands; in a longer trap under `set -e` write
#   `slurm_stop || true; ...`, as a failing command ends an EXIT trap there). Unsets SLURM_CONF
#   if it still names this cluster. WORKDIR is the caller's to remove.
#   Should the calling shell die without its EXIT trap (SIGKILL, e.g. ctest's TIMEOUT), a
#   watchdog started by slurm_start (setsid, not a child of the caller, so `wait` never waits for
#   it) does the same within about a second.
#
# slurm_leftovers [CLUSTER_DIR]
#   Prints the pids of this cluster's processes still alive (by default the last cluster
#   slurm_start made in this shell, stopped or not), one a line; prints nothing when none.
#
# What a caller must know:
#   - Auth is real: auth/munge and cred/munge against the private munged (AuthInfo=socket=...).
#     munged runs with --force: its socket sits in the caller's 0700 mktemp dir, which munged's
#     "all users can reach the socket" check rejects; only root uses this cluster, so that is fine.
#   - No accounting (no slurmdbd, sacct does not work). A finished task is not listed by
#     `squeue -h -j JOBID` (so polling that until empty works), but `scontrol show job JOBID`
#     lists every task with JobState=COMPLETED/FAILED/CANCELLED/TIMEOUT and ExitCode=N:SIG for
#     MinJobAge (300 s) after it ended; after that the job id is unknown (squeue then prints
#     "Invalid job id specified" to stderr, exit 1, nothing on stdout). A task's output file
#     exists as soon as the task started (Slurm creates it), so a missing result file, not a
#     missing output file, is how a caller without scontrol tells a failed task.
#   - Tasks run as root (the submitter), in sbatch's working directory unless --chdir is given;
#     their stdout+stderr go to --output (default: slurm-%A_%a.out in that directory).
#   - At most SLURM_CLUSTER_CPUS one-CPU tasks run at once; the rest wait (PD, Resources).
#     Array indices up to 1000 (MaxArraySize default 1001). KillWait is 2 s.
#   - Job ids start at 1 in every cluster; two concurrent clusters are separate worlds.
#   - Latency: slurmctld's first scheduling pass comes about 3 s after its start, so the first
#     job waits that long; afterwards a submitted or freed-up task starts within about 1 s (the
#     controller's 1 s background tick; batch_sched_delay=0 removes the default 3 s more).
#     A 3-task array on 2 CPUs: about 4 s first, 2 s later; the start itself takes under 1.5 s.
#   - Plain `slurm_start DIR` under `set -e` exits the script with 77 on a skip (ctest: skipped),
#     but without the "skipped:" line; use `|| rc=$?` as above to print it.

_SLURM_CLUSTER_SH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
# shellcheck source=port_lease.sh
source "$(dirname "$_SLURM_CLUSTER_SH")/port_lease.sh"

_SLURM_RUNNING=""  # the cluster dir while this shell's cluster is up (between start and stop)
_SLURM_LAST=""     # the last cluster dir, for slurm_leftovers after the stop

# ---- process helpers: none of them fails the caller's `set -e` ----

# True while PID names a live process (a zombie counts as dead: it holds nothing).
_slurm_alive() {
  local s
  [[ $1 =~ ^[0-9]+$ ]] || return 1
  read -r s 2>/dev/null <"/proc/$1/stat" || return 1
  s=${s##*) }
  [[ -n $s && ${s:0:1} != Z ]]
}

# Waits up to TENTHS tenths of a second until none of PIDS is alive; true if none is.
_slurm_wait_gone() {
  local tenths=$1 pid alive i
  shift
  for ((i = 0; ; i++)); do
    alive=0
    for pid in "$@"; do
      if _slurm_alive "$pid"; then alive=1; fi
    done
    ((alive)) || return 0
    ((i < tenths)) || return 1
    sleep 0.1
  done
}

# TERM, up to TENTHS tenths of a second, then KILL (and 2 s more) for PIDS.
_slurm_kill() {
  local tenths=$1
  shift
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  _slurm_wait_gone "$tenths" "$@" && return 0
  kill -KILL "$@" 2>/dev/null || true
  _slurm_wait_gone 20 "$@"
}

# The calling shell and its ancestors, one a line: never ours to kill.
_slurm_ancestors() {
  local pid=$BASHPID ppid
  while [[ $pid =~ ^[0-9]+$ ]] && ((pid > 1)); do
    echo "$pid"
    ppid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || break
    pid=$ppid
  done
}

# The pids of cluster DIR's live processes, one a line, sorted, the caller's ancestry excluded:
#   - the daemons, their helpers and slurmstepds: started with KF_SLURM_CLUSTER=DIR, inherited;
#   - the watchdog: KF_SLURM_WATCHDOG=DIR;
#   - job processes: SLURM_CONF=DIR/slurm.conf and a SLURM_JOB_ID (Slurm sets both in the job's
#     environment, even under --export=NONE), and every process in a slurmstepd's session (a
#     task that cleared its environment stays in it).
_slurm_ours() {
  local dir=$1 f pid sid comm
  local -A skip=() sids=() out=()
  for pid in $(_slurm_ancestors); do skip[$pid]=1; done
  local mysid
  mysid=$(ps -o sid= -p "$BASHPID" 2>/dev/null | tr -d ' ')
  local envs=(/proc/[0-9]*/environ)
  while read -r f; do
    pid=${f#/proc/}; pid=${pid%/environ}
    out[$pid]=1
  done < <(grep -lszxF -e "KF_SLURM_CLUSTER=$dir" -e "KF_SLURM_WATCHDOG=$dir" "${envs[@]}" 2>/dev/null)
  local withconf=()
  mapfile -t withconf < <(grep -lszxF -e "SLURM_CONF=$dir/slurm.conf" "${envs[@]}" 2>/dev/null)
  if ((${#withconf[@]})); then
    while read -r f; do
      pid=${f#/proc/}; pid=${pid%/environ}
      out[$pid]=1
    done < <(grep -lsz '^SLURM_JOB_ID=' "${withconf[@]}" 2>/dev/null)
  fi
  while read -r pid sid comm; do
    if [[ -n ${out[$pid]:-} && $comm == slurmstepd && $sid != "$mysid" ]]; then sids[$sid]=1; fi
  done < <(ps -e -o pid=,sid=,comm= 2>/dev/null)
  if ((${#sids[@]})); then
    while read -r pid sid; do
      if [[ -n ${sids[$sid]:-} ]]; then out[$pid]=1; fi
    done < <(ps -e -o pid=,sid= 2>/dev/null)
  fi
  for pid in "${!out[@]}"; do
    if [[ -z ${skip[$pid]:-} ]] && _slurm_alive "$pid"; then echo "$pid"; fi
  done | sort -n
  return 0
}

# True if PID is alive and one of cluster DIR's daemons (guards pid files against reuse).
_slurm_is_ours() {
  _slurm_alive "$1" && grep -qszxF -e "KF_SLURM_CLUSTER=$2" "/proc/$1/environ" 2>/dev/null
}

# The pid in FILE, or nothing.
_slurm_pidfile() {
  local p=""
  [[ -r $1 ]] && read -r p <"$1" 2>/dev/null
  [[ $p =~ ^[0-9]+$ ]] && echo "$p"
  return 0
}

# ---- stop ----

# Stops everything of cluster DIR (slurm_stop's work, also the watchdog's). Returns 0 if nothing
# is left.
_slurm_teardown() {
  local dir=$1 conf=$1/slurm.conf pid ids name i left
  : >"$dir/stopped" 2>/dev/null || true  # tells the watchdog to go
  # 1. Cancel every job while slurmctld can still do it cleanly (scancel kills the job's process
  #    group, then slurmstepd tidies up); bounded, the sweep below is the backstop.
  pid=$(_slurm_pidfile "$dir/slurmctld.pid")
  if [[ -n $pid ]] && _slurm_is_ours "$pid" "$dir" && [[ -r $conf ]]; then
    ids=$(SLURM_CONF=$conf timeout 10 squeue -h -o %A 2>/dev/null | sort -un | tr '\n' ' ') || true
    if [[ -n ${ids// /} ]]; then
      # shellcheck disable=SC2086
      SLURM_CONF=$conf timeout 10 scancel $ids 2>/dev/null || true
      for ((i = 0; i < 100; i++)); do
        [[ -z $(SLURM_CONF=$conf timeout 5 squeue -h -o %A 2>/dev/null) ]] && break
        sleep 0.2
      done
    fi
  fi
  # 2. The daemons, the node first (it may tell the controller), munged last (the others use it).
  for name in slurmd slurmctld munged; do
    pid=$(_slurm_pidfile "$dir/$name.pid")
    if [[ -n $pid ]] && _slurm_is_ours "$pid" "$dir"; then _slurm_kill 100 "$pid" || true; fi
  done
  # 3. Whatever is left: daemons that wrote no pid file, slurmscriptd, slurmstepd, job processes.
  for ((i = 0; i < 3; i++)); do
    mapfile -t left < <(_slurm_ours "$dir")
    ((${#left[@]})) || return 0
    _slurm_kill 50 "${left[@]}" || true
  done
  mapfile -t left < <(_slurm_ours "$dir")
  ((${#left[@]})) || return 0
  echo "slurm_cluster: processes of $dir survived KILL: ${left[*]}" >&2
  ps -o pid,ppid,stat,cmd -p "$(IFS=,; echo "${left[*]}")" >&2 2>/dev/null || true
  return 1
}

slurm_stop() {
  local dir=${_SLURM_RUNNING:-} rc=0
  [[ -n $dir ]] || return 0
  _slurm_teardown "$dir" || rc=1
  _SLURM_RUNNING=""
  if [[ ${SLURM_CONF:-} == "$dir/slurm.conf" ]]; then unset SLURM_CONF; fi
  return "$rc"
}

slurm_leftovers() {
  local dir=${1:-${_SLURM_LAST:-}}
  [[ -n $dir ]] || return 0
  _slurm_ours "$dir"
}

# Runs detached (setsid -f, stdio to a file): waits while CALLER lives and the cluster is not
# stopped, then tears the cluster down. Its own environment names it (KF_SLURM_WATCHDOG=DIR),
# so slurm_stop finds and ends it.
_slurm_watchdog() {
  local dir=$1 caller=$2
  while _slurm_alive "$caller" && [[ ! -e $dir/stopped ]]; do sleep 1; done
  [[ -e $dir/stopped ]] && return 0
  echo "slurm_cluster watchdog: caller $caller is gone without slurm_stop; stopping $dir"
  _slurm_teardown "$dir"
}

# ---- start ----

# The fatal line of LOG (or its last error, or its last line), for a skip reason. Errors every
# start logs are noise: no PMIx library (mpi/pmix* plugins), no state files yet (a fresh dir).
_slurm_log_reason() {
  local log=$1 line=""
  [[ -r $log ]] || { echo "no log $log"; return 0; }
  line=$(grep -m1 -E 'fatal|Error:' "$log" 2>/dev/null) ||
    line=$(grep -v -E 'pmix|PMIx|MPI|state file|state save file' "$log" 2>/dev/null |
      grep -E 'error' | tail -n 1) ||
    line=$(tail -n 1 "$log" 2>/dev/null) || true
  echo "${line:-empty $log}"
}

# Prints the reason and stops what was started (slurm_start then returns 77). Returns 0, so a
# caller's `set -e` cannot cut slurm_start short before its `return 77`.
_slurm_fail() {
  SLURM_CLUSTER_SKIP_REASON="$*"
  echo "slurm_cluster: cannot start a one-node Slurm cluster here: $*" >&2
  if [[ -n ${_SLURM_RUNNING:-} ]]; then
    echo "slurm_cluster: logs in $_SLURM_RUNNING" >&2
    slurm_stop || true
  fi
  return 0
}

slurm_start() {
  local work=${1:-}
  if [[ -z $work || ! -d $work ]]; then
    echo "slurm_start: usage: slurm_start WORKDIR (an existing directory)" >&2
    return 1
  fi
  if [[ -n ${_SLURM_RUNNING:-} ]]; then
    echo "slurm_start: a cluster is already running in this shell ($_SLURM_RUNNING)" >&2
    return 1
  fi
  SLURM_CLUSTER_SKIP_REASON=""
  local started_ns
  started_ns=$(date +%s%N)
  if [[ $(id -u) != 0 ]]; then
    _slurm_fail "not root (slurmd runs jobs as their submitter and needs root)"
    return 77
  fi
  local b
  for b in slurmctld slurmd munged sbatch squeue sinfo scancel scontrol setsid timeout flock; do
    if ! command -v "$b" >/dev/null 2>&1; then
      _slurm_fail "$b is missing (Debian: apt-get install slurm-wlm munge)"
      return 77
    fi
  done

  local dir
  dir="$(cd "$work" && pwd)/slurm-cluster"
  rm -rf "$dir"
  if ! mkdir -p "$dir/state" "$dir/spool" || ! chmod 700 "$dir"; then
    _slurm_fail "cannot make $dir"
    return 77
  fi
  _SLURM_RUNNING=$dir
  _SLURM_LAST=$dir

  # The watchdog first, so a caller killed during the start leaves nothing either.
  # shellcheck disable=SC2016  # $1.. are the watchdog's arguments
  KF_SLURM_WATCHDOG=$dir setsid -f bash -c 'source "$1" && _slurm_watchdog "$2" "$3"' \
    slurm-watchdog "$_SLURM_CLUSTER_SH" "$dir" "$BASHPID" </dev/null >>"$dir/watchdog.log" 2>&1 ||
    true

  # munged: a key of its own (mungekey, else 1 KiB of /dev/urandom), its own socket, pid, log and
  # seed. --force: see the header (the socket's directory is the caller's 0700 mktemp dir).
  local sock=$dir/munge.socket key=$dir/munge.key
  if command -v mungekey >/dev/null 2>&1; then
    mungekey --create --bits=1024 --keyfile="$key" >>"$dir/munged.stdio" 2>&1 || rm -f "$key"
  fi
  if [[ ! -s $key ]]; then
    dd if=/dev/urandom of="$key" bs=1024 count=1 status=none 2>>"$dir/munged.stdio" || true
  fi
  chmod 600 "$key" 2>/dev/null || true
  if [[ ! -s $key ]]; then
    _slurm_fail "cannot make a munge key: $(tail -n 1 "$dir/munged.stdio")"
    return 77
  fi
  if ! KF_SLURM_CLUSTER=$dir munged --force --socket="$sock" --key-file="$key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" \
    </dev/null >>"$dir/munged.stdio" 2>&1; then
    _slurm_fail "munged did not start: $(_slurm_log_reason "$dir/munged.log")"
    return 77
  fi
  if command -v munge >/dev/null 2>&1 && command -v unmunge >/dev/null 2>&1; then
    local i ok=0
    for ((i = 0; i < 50; i++)); do
      if munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; then ok=1; break; fi
      sleep 0.1
    done
    if ((!ok)); then
      _slurm_fail "munged answers no credential on $sock: $(_slurm_log_reason "$dir/munged.log")"
      return 77
    fi
  fi

  # Ports: a lease of our own; the caller's PORT_BASE, if any, is put back.
  local saved_base=${PORT_BASE-} had_base=${PORT_BASE+x}
  lease_ports 64
  SLURM_CLUSTER_PORT_BASE=$PORT_BASE
  if [[ -n $had_base ]]; then PORT_BASE=$saved_base; else unset PORT_BASE; fi
  local base=$SLURM_CLUSTER_PORT_BASE

  SLURM_CLUSTER_DIR=$dir
  SLURM_CLUSTER_NODE=localhost
  SLURM_CLUSTER_PARTITION=local
  SLURM_CLUSTER_CPUS=$(nproc)
  local conf=$dir/slurm.conf
  : >"$dir/plugstack.conf"  # no SPANK plugins (else /etc/slurm/plugstack.conf.d might be read)
  cat >"$conf" <<EOF
# Generated by tests/slurm_cluster.sh: a throw-away one-node cluster; everything under $dir.
ClusterName=kftest$base
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SrunPortRange=$((base + 2))-$((base + 63))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$dir/plugstack.conf
# No cgroups, no accounting: nothing outside $dir, nothing a container lacks.
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# Schedule at once on submit and on a task's end (default: up to 3 s later each time).
SchedulerParameters=batch_sched_delay=0
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
ReturnToService=2
# The node as configured here, whatever the hardware probe says (no DRAIN on a mismatch).
SlurmdParameters=config_overrides
# A cancelled task gets KILL 2 s after TERM (default 30 s).
KillWait=2
# A finished job stays visible to scontrol show job this long (s): how a failed task is seen.
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 NodeHostname=localhost CPUs=$SLURM_CLUSTER_CPUS State=UNKNOWN
PartitionName=$SLURM_CLUSTER_PARTITION Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

  # The daemons fork into the background themselves (not children of the caller: a bare `wait`
  # does not wait for them); each carries KF_SLURM_CLUSTER=DIR, which its children inherit.
  local name
  for name in slurmctld slurmd; do
    local args=(-f "$conf")
    [[ $name == slurmd ]] && args+=(-N localhost)
    if ! (cd "$dir" && KF_SLURM_CLUSTER=$dir SLURM_CONF=$conf "$name" "${args[@]}") \
      </dev/null >>"$dir/$name.stdio" 2>&1; then
      _slurm_fail "$name did not start: $(head -n 1 "$dir/$name.stdio")" \
        "$(_slurm_log_reason "$dir/$name.log")"
      return 77
    fi
  done

  # Up when both daemons live and sinfo shows the node idle; a daemon that dies is the reason.
  local limit=${SLURM_CLUSTER_START_TIMEOUT:-30} state="" pid deadline
  deadline=$((SECONDS + limit))
  while :; do
    for name in slurmctld slurmd; do
      pid=$(_slurm_pidfile "$dir/$name.pid")
      if { [[ -n $pid ]] && ! _slurm_alive "$pid"; } || grep -qs 'fatal' "$dir/$name.log"; then
        _slurm_fail "$name exited: $(_slurm_log_reason "$dir/$name.log")"
        return 77
      fi
    done
    state=$(SLURM_CONF=$conf timeout 5 sinfo -h -n localhost -o %T 2>/dev/null) || state=""
    [[ $state == idle ]] && break
    if ((SECONDS >= deadline)); then
      _slurm_fail "node not idle after ${limit} s (sinfo: '${state:-no answer}'):" \
        "$(_slurm_log_reason "$dir/slurmctld.log") / $(_slurm_log_reason "$dir/slurmd.log")"
      return 77
    fi
    sleep 0.2
  done
  export SLURM_CONF=$conf
  SLURM_CLUSTER_START_S=$(awk -v a="$started_ns" -v b="$(date +%s%N)" \
    'BEGIN {printf "%.2f", (b - a) / 1e9}')
  echo "slurm_cluster: up in ${SLURM_CLUSTER_START_S} s: node localhost" \
    "($SLURM_CLUSTER_CPUS CPUs), ports $base-$((base + 63)), $dir" >&2
  return 0
}
