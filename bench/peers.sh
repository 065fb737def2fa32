#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# kfbench beside its peers: the same float-sum allreduce by kfbench (under kfrun), Gloo
# (gloo::allreduce over its TCP transport; bench/peers/gloo_allreduce.cc) and Open MPI
# (MPI_Allreduce; bench/peers/mpi_allreduce.cc), from 8 B to 256 MiB, at 2 and 4 ranks, on this
# host (over TCP, then each system through its own one-host path) and then in 4 network
# namespaces on a bridge with 10 Gbit/s tbf links (a host each).
#   bench/peers.sh [BUILD_DIR] [--quick] [--out DIR] [--worlds LIST] [--no-netns] [--sizes LIST]
#                  [--ranks LIST] [--iters N] [--warmup N] [--systems LIST] [--kf-strategy S]
#                  [--note TEXT]                                          (./kf bench peers)
# --quick: 8 B, 4 KiB, 256 KiB, 4 MiB and 64 MiB with fewer iterations (for testing).
# --sizes LIST: these sizes instead (8,4K,1M: multiples of 4 bytes), each a block of its own.
# --ranks LIST: rank counts (default 2,4). --iters / --warmup: the same counts for every size.
# --systems LIST: a subset of kfbench,gloo,mpi. --kf-strategy: kfbench's -strategy (default: the
# engine's own choice). --worlds LIST: a subset of host,local,netns (default: all three, in that
# order). --no-netns: leave netns out. --note: a line for the README (e.g. what else the machine
# was doing).
# Writes DIR/peers.csv (system,ranks,where,bytes,iterations,p50_us,mean_us,algbw_GBps,
# busbw_GBps,note), DIR/README.md (the table) and DIR/peers.png (busbw and p50 against size),
# DIR/meta.txt and DIR/logs/ (the output of any run that failed); DIR defaults to
# bench/results/peers-DATE (peers-DATE-quick with --quick). Exit 1 when a run failed (its rows
# then say so, with no figures), 2 on bad arguments or when kfrun/kfbench are not built.
#
# Honest in nccl-tests' way: every system runs the same sizes with the same iteration counts,
# times each iteration on every rank in a barrier-free loop after its warm-up and takes the
# slowest rank's time per iteration; p50 and mean are over those iterations, algbw = bytes /
# mean, busbw = algbw x 2(n-1)/n. The sizes are run in blocks, and every block runs each system
# in turn, the order rotated from block to block, so that a drifting machine weighs on all of
# them alike. A system that is not built or fails gets rows that say so, never a number.
#
# Transports. "host": all three over TCP, one pseudo-host per rank on loopback (127.0.0.1,
# 127.0.0.2, ...), Open MPI with --mca btl tcp,self (KF_PEERS_MPI_BTL to change). "local": every
# rank on one host, each system as a job on one machine runs: kfbench's workers over Unix sockets,
# lending payloads of 64 KiB and more (a peer reads them from the sender's memory); Open MPI
# through its shared memory, --mca btl vader,self (KF_PEERS_MPI_LOCAL_BTL to change); Gloo over
# loopback TCP, which is all it has.
# "netns" (root only; skipped with a note otherwise): tests/netns_lib.sh's namespaces on a bridge,
# each link shaped to 10 Gbit/s with tbf both ways, MTU 9000 (KF_PEERS_MTU); mpirun runs in the
# first namespace and starts its daemons in the others through bench/peers/netns_agent.sh (as
# its ssh); kfrun and Gloo's ranks are started in each namespace; Gloo's ranks meet through a
# file store. Open MPI yields when idle where ranks outnumber the cores (the others block in
# epoll anyway). Environment: KF_PEERS_PORT (first kfbench worker port, default 25000; the 11
# ports from it are used), KF_PEERS_RUN_TIMEOUT (seconds a run may take, default 600),
# KF_PEERS_KFBENCH_ARGS (more kfbench flags, e.g. "-chunk 256K" or "-auto-ring-part 1G").
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$here/build/release"
if [[ $# -gt 0 && -d "$1" ]]; then
  build="$1"
  shift
fi
die() {
  echo "peers: $*" >&2
  exit 2
}
out=""
quick=0
netns=1
sizes_arg=""
ranks_arg="2,4"
iters_arg=""
warmup_arg=""
systems_arg="kfbench,gloo,mpi"
worlds_arg="host,local,netns"
kf_strategy=""
note=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --no-netns) netns=0 ;;
    --out | --sizes | --ranks | --iters | --warmup | --systems | --kf-strategy | --note | --worlds)
      [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value"
      case "$1" in
        --out) out="$2" ;;
        --sizes) sizes_arg="$2" ;;
        --ranks) ranks_arg="$2" ;;
        --iters) iters_arg="$2" ;;
        --warmup) warmup_arg="$2" ;;
        --systems) systems_arg="$2" ;;
        --kf-strategy) kf_strategy="$2" ;;
        --note) note="${2//$'\n'/ }" ;;
        --worlds) worlds_arg="$2" ;;
      esac
      shift
      ;;
    *) die "unknown argument '$1'" ;;
  esac
  shift
done
[[ -z "$iters_arg" || "$iters_arg" =~ ^[1-9][0-9]*$ ]] || die "--iters: '$iters_arg' is not a count"
[[ -z "$warmup_arg" || "$warmup_arg" =~ ^[0-9]+$ ]] || die "--warmup: '$warmup_arg' is not a count"

# "4K" -> 4096 (binary multiples K, M, G); empty on anything else.
bytes_of() {
  local s="$1" m=1
  case "$s" in
    *[kK]) m=1024 ;;
    *[mM]) m=$((1 << 20)) ;;
    *[gG]) m=$((1 << 30)) ;;
  esac
  ((m == 1)) || s="${s%?}"
  # An if, not an &&: a false test would be the function's status, and under set -e the
  # assignment from it would end the script before the caller could say what was wrong.
  if [[ "$s" =~ ^[0-9]+$ ]]; then echo $((10#$s * m)); fi
}

IFS=, read -r -a ranks <<<"$ranks_arg"
for n in "${ranks[@]}"; do [[ "$n" =~ ^[1-9][0-9]*$ && $n -ge 2 ]] || die "--ranks: '$n' is not a rank count of 2 or more"; done
IFS=, read -r -a systems <<<"$systems_arg"
for s in "${systems[@]}"; do [[ "$s" =~ ^(kfbench|gloo|mpi)$ ]] || die "--systems: unknown system '$s'"; done
IFS=, read -r -a worlds <<<"$worlds_arg"
for w in "${worlds[@]}"; do [[ "$w" =~ ^(host|local|netns)$ ]] || die "--worlds: unknown world '$w' (host, local, netns)"; done
has_world() { [[ ",$worlds_arg," == *",$1,"* ]]; }
has_world netns || netns=0

# The blocks: sizes (comma-separated, a x2 progression), iterations and warm-up of each.
B_SIZES=()
B_ITERS=()
B_WARM=()
counts_of() {  # BYTES -> "ITERS WARMUP": fewer iterations for larger sizes, the same for all systems
  local b=$1 t
  if ((quick)); then
    if ((b <= 4096)); then t="50 5"; elif ((b <= 262144)); then t="30 5"
    elif ((b <= 8 << 20)); then t="10 2"; else t="5 1"; fi
  else
    if ((b <= 4096)); then t="200 20"; elif ((b <= 262144)); then t="100 10"
    elif ((b <= 8 << 20)); then t="30 5"; else t="20 3"; fi
  fi
  read -r i w <<<"$t"
  echo "${iters_arg:-$i} ${warmup_arg:-$w}"
}
add_block() {  # SIZES ITERS WARMUP
  B_SIZES+=("$1")
  B_ITERS+=("$2")
  B_WARM+=("$3")
}
if [[ -n "$sizes_arg" || $quick -eq 1 ]]; then
  IFS=, read -r -a list <<<"${sizes_arg:-8,4K,256K,4M,64M}"
  for s in "${list[@]}"; do
    b="$(bytes_of "$s")"
    if [[ -z "$b" ]] || ((b == 0 || b % 4 != 0)); then
      die "--sizes: '$s' is not a multiple of 4 bytes"
    fi
    read -r i w <<<"$(counts_of "$b")"
    add_block "$b" "$i" "$w"
  done
else
  # 8 B .. 256 MiB by 2; a block is up to 5 consecutive sizes with the same counts.
  cur="" cur_counts="" len=0
  for ((b = 8; b <= 256 << 20; b *= 2)); do
    c="$(counts_of "$b")"
    if [[ -n "$cur" && ("$c" != "$cur_counts" || $len -ge 5) ]]; then
      add_block "$cur" "${cur_counts% *}" "${cur_counts#* }"
      cur="" len=0
    fi
    cur="${cur:+$cur,}$b" cur_counts="$c" len=$((len + 1))
  done
  add_block "$cur" "${cur_counts% *}" "${cur_counts#* }"
fi

KFRUN="$build/apps/kfrun"
KFBENCH="$build/apps/kfbench"
GLOO="$build/bench/gloo_allreduce"
MPIB="$build/bench/mpi_allreduce"
for f in "$KFRUN" "$KFBENCH"; do [[ -x "$f" ]] || die "no $f (build first: ./kf setup)"; done
declare -A missing=()
[[ -x "$GLOO" ]] || missing[gloo]="not built (apt-get install libgloo-dev, then rebuild)"
if [[ ! -x "$MPIB" ]]; then
  missing[mpi]="not built (apt-get install libopenmpi-dev openmpi-bin, then rebuild)"
elif ! command -v mpirun >/dev/null; then
  missing[mpi]="no mpirun (apt-get install openmpi-bin)"
fi

if [[ -z "$out" ]]; then
  out="$here/bench/results/peers-$(date +%F)"
  ((quick)) && out="$out-quick"
fi
mkdir -p "$out"
rm -rf "$out/logs"
csv="$out/peers.csv"
echo "system,ranks,where,bytes,iterations,p50_us,mean_us,algbw_GBps,busbw_GBps,note" >"$csv"

PORT="${KF_PEERS_PORT:-25000}"
RUN_TIMEOUT="${KF_PEERS_RUN_TIMEOUT:-600}"
MPI_BTL="${KF_PEERS_MPI_BTL:-tcp,self}"
MPI_LOCAL_BTL="${KF_PEERS_MPI_LOCAL_BTL:-vader,self}"
CORES="$(nproc)"
# tests/netns_lib.sh's settings: TAG, N, SUBNET, MTU, WORK.
TAG="kfq$$"
N=0
for n in "${ranks[@]}"; do ((n > N)) && N=$n; done
SUBNET=10.83.0
MTU="${KF_PEERS_MTU:-9000}"
RATE=10gbit
WORK="$(mktemp -d)"
export KF_PEERS_NETNS="$TAG" KF_PEERS_SUBNET="$SUBNET"  # for bench/peers/netns_agent.sh
# shellcheck source=../tests/netns_lib.sh disable=SC1091  # followed with shellcheck -x
source "$here/tests/netns_lib.sh"
netns_made=0
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  if ((netns_made)); then
    netns_cleanup
  else
    for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null; done
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
export KUNGFU_SECRET="peers-bench-$$"  # several kfruns a job: they need one secret

# Rank i's address and the command prefix that puts a process on its host.
addr_of() {  # WHERE I
  case $1 in
    netns) echo "$SUBNET.$(($2 + 1))" ;;
    local) echo 127.0.0.1 ;;
    *) echo "127.0.0.$(($2 + 1))" ;;
  esac
}
on() {  # WHERE I COMMAND...
  local where=$1 i=$2
  shift 2
  if [[ $where == netns ]]; then
    ip netns exec "${TAG}n$i" "$@"
  else
    "$@"
  fi
}

# Each run_* prints its CSV rows on stdout and its diagnostics on stderr.
run_kfbench() {  # N WHERE SIZES ITERS WARMUP
  local n=$1 where=$2 sizes=$3 iters=$4 warm=$5 hosts="" i pids=() rc=0 runners=$1
  for ((i = 0; i < n; i++)); do hosts="${hosts:+$hosts,}$(addr_of "$where" "$i"):1"; done
  # local: one runner starts all n workers of its one host.
  [[ $where != local ]] || { hosts="127.0.0.1:$n" runners=1; }
  local args=(allreduce -b "${sizes%%,*}" -e "${sizes##*,}" -f 2 -n "$iters" -w "$warm" -c 1 -json)
  [[ -z "$kf_strategy" ]] || args+=(-strategy "$kf_strategy")
  # shellcheck disable=SC2206 # KF_PEERS_KFBENCH_ARGS is a list of words
  args+=(${KF_PEERS_KFBENCH_ARGS:-})
  for ((i = 0; i < runners; i++)); do
    on "$where" "$i" timeout -k 5 "$RUN_TIMEOUT" "$KFRUN" -q -v=false -np "$n" -H "$hosts" \
      -self "$(addr_of "$where" "$i")" -port-range "$PORT-$((PORT + 9))" \
      -runner-port $((PORT + 10)) "$KFBENCH" "${args[@]}" >"$WORK/kf$i" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  for ((i = 1; i < runners; i++)); do sed "s/^/[rank host $i] /" "$WORK/kf$i" >&2; done
  grep -v '^{' "$WORK/kf0" >&2 || true
  ((rc == 0)) || return "$rc"
  grep '^{' "$WORK/kf0" | tail -1 >"$WORK/kf.json"
  /usr/bin/python3 "$here/bench/peers_report.py" kfbench "$WORK/kf.json" "$n" "$where" "$iters"
}

run_gloo() {  # N WHERE SIZES ITERS WARMUP
  local n=$1 where=$2 sizes=$3 iters=$4 warm=$5 i pids=() rc=0 store
  store="$(mktemp -d "$WORK/store.XXXXXX")"
  for ((i = 0; i < n; i++)); do
    on "$where" "$i" timeout -k 5 "$RUN_TIMEOUT" "$GLOO" --rank "$i" --size "$n" --store "$store" \
      --host "$(addr_of "$where" "$i")" --sizes "$sizes" --iters "$iters" --warmup "$warm" \
      --system gloo --where "$where" >"$WORK/gloo$i" 2>"$WORK/gloo$i.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$WORK"/gloo*.err >&2
  cat "$WORK/gloo0"
  rm -rf "$store" "$WORK"/gloo*
  return "$rc"
}

run_mpi() {  # N WHERE SIZES ITERS WARMUP
  local n=$1 where=$2 sizes=$3 iters=$4 warm=$5 i btl=$MPI_BTL
  [[ $where != local ]] || btl=$MPI_LOCAL_BTL
  local args=(-np "$n" --bind-to none --mca pml ob1 --mca btl "$btl"
    --mca btl_base_warn_component_unused 0)
  ((n <= CORES)) || args+=(--mca mpi_yield_when_idle 1)
  if [[ $where == netns ]]; then
    : >"$WORK/hostfile"
    for ((i = 0; i < n; i++)); do echo "$(addr_of netns "$i") slots=1" >>"$WORK/hostfile"; done
    args+=(--hostfile "$WORK/hostfile" --mca plm_rsh_agent "$here/bench/peers/netns_agent.sh"
      --mca plm_rsh_no_tree_spawn 1 --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0)
  elif [[ $where == local ]]; then
    args+=(--oversubscribe --mca oob_tcp_if_include lo)
  else
    args+=(--oversubscribe --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
  fi
  on "$where" 0 timeout -k 5 "$RUN_TIMEOUT" \
    mpirun "${args[@]}" "$MPIB" --sizes "$sizes" --iters "$iters" --warmup "$warm" \
    --system mpi --where "$where"
}

failed=0
# One system on one block: its rows into peers.csv, or rows that say why there are none.
run_block() {  # SYSTEM N WHERE BLOCK
  local sys=$1 n=$2 where=$3 k=$4 rc=0 rows s want got reason
  local sizes=${B_SIZES[$k]} iters=${B_ITERS[$k]} warm=${B_WARM[$k]}
  local log="$WORK/$sys-$n-$where-$k.log"
  echo "peers: $where, $n ranks, $sys: $sizes B x $iters" >&2
  case "$sys" in
    kfbench) run_kfbench "$n" "$where" "$sizes" "$iters" "$warm" ;;
    gloo) run_gloo "$n" "$where" "$sizes" "$iters" "$warm" ;;
    mpi) run_mpi "$n" "$where" "$sizes" "$iters" "$warm" ;;
  esac >"$WORK/rows" 2>"$log" || rc=$?
  rows="$(grep -E "^$sys,$n,$where,[0-9]+," "$WORK/rows" || true)"
  want="$(tr ',' '\n' <<<"$sizes" | sort -n | tr '\n' ' ')"
  got="$(cut -d, -f4 <<<"$rows" | sort -n | tr '\n' ' ')"
  if ((rc == 0)) && [[ "$want" == "$got" ]]; then
    echo "$rows" >>"$csv"
    return
  fi
  failed=1
  mkdir -p "$out/logs"
  cp "$log" "$out/logs/"
  # An empty log is a reason too ("no output"), not the end of the script (grep finds nothing).
  reason="$({ grep -v '^\s*$' "$log" || true; } | tail -1 | tr -d ',"\r' | cut -c1-160)"
  reason="${reason:-no output}"
  ((rc == 0)) && reason="rows missing: $reason"
  echo "peers: $where, $n ranks, $sys failed (exit $rc): $reason (logs/$(basename "$log"))" >&2
  for s in ${sizes//,/ }; do
    echo "$sys,$n,$where,$s,$iters,,,,,failed (exit $rc): $reason" >>"$csv"
  done
}

run_world() {  # WHERE
  local where=$1 n k j sys order
  for n in "${ranks[@]}"; do
    for sys in "${systems[@]}"; do
      [[ -z "${missing[$sys]:-}" ]] || echo "$sys,$n,$where,,,,,,,${missing[$sys]}" >>"$csv"
    done
    for ((k = 0; k < ${#B_SIZES[@]}; k++)); do
      order=()
      for ((j = 0; j < ${#systems[@]}; j++)); do
        sys="${systems[$(((j + k) % ${#systems[@]}))]}"
        [[ -n "${missing[$sys]:-}" ]] || order+=("$sys")
      done
      for sys in ${order[@]+"${order[@]}"}; do run_block "$sys" "$n" "$where" "$k"; done
    done
  done
}

{
  echo "date=$(date -Is)"
  echo "mode=$( ((quick)) && echo quick || echo full)"
  echo "cores=$CORES"
  echo "kernel=$(uname -r)"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
  echo "open_mpi=$(mpirun --version 2>/dev/null | head -1 || true)"
  echo "gloo=$(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || true)"
  echo "kf_strategy=${kf_strategy:-engine default}"
  echo "mpi_btl=$MPI_BTL"
  has_world local && echo "mpi_local_btl=$MPI_LOCAL_BTL"
  echo "note=$note"
} >"$out/meta.txt"

has_world host && run_world host
has_world local && run_world local

netns_note="skipped: --no-netns or --worlds"
if ((netns)); then
  # netns_lib's setup exits 77 with a reason where namespaces cannot be made: in a subshell.
  netns_made=1
  setup_rc=0
  (netns_setup "$RATE") >"$WORK/netns.log" 2>&1 || setup_rc=$?
  if ((setup_rc == 0)); then
    netns_note="$N namespaces on a bridge, $RATE tbf each way, MTU $MTU"
    run_world netns
  else
    netns_note="skipped: $(grep -v '^\s*$' "$WORK/netns.log" | tail -1)"
    echo "peers: network namespaces $netns_note" >&2
  fi
fi
{
  echo "netns=$netns_note"
  echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)"
} >>"$out/meta.txt"

/usr/bin/python3 "$here/bench/peers_report.py" report "$out"
echo "peers: wrote $out/peers.csv, $out/README.md, $out/peers.png" >&2
exit "$failed"
