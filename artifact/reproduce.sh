#!/usr/bin/env bash
# Reproduces the OSDI'20 paper's figures 4-9 with this testbed (see artifact/README.md).
#
#   artifact/reproduce.sh figN|all [figM ...] [--mode sim|real] [--quick] [--records DIR]
#                         [--out DIR] [--build DIR] [--set KEY=VALUE ...] [--seeds N [--seed-base B]]
#                         [--model mlp|torch]
#
# Each figure writes OUT/figN.{png,pdf,csv,md} (OUT: artifact/out, or $KF_ARTIFACT_OUT) and checks
# the paper's qualitative claim against its own numbers. Exit code: 0 every figure's claim holds;
# 1 otherwise (a claim contradicted, a run failed, or a figure not available yet), 2 bad usage.
# The build directory (apps/kfsim, kfrun, kftrain) is build/release unless --build or $KF_BUILD.
# --seeds N (sim mode, N > 1): each figure runs at seeds B..B+N-1 (--seed-base B, default 1) into
# OUT/seeds/seed=S/, then OUT/figN.seeds.{csv,md} count the seeds at which each check holds.
# --model torch (fig4 only): Fig. 4 with a PyTorch CNN on Fashion-MNIST inside kfsim.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY=/usr/bin/python3

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
die() { echo "reproduce.sh: $*" >&2; exit 2; }

# The value of an integer flag: digits only (at most 9), at least MIN, else exit 2 naming the flag.
int_flag() {  # FLAG VALUE MIN
  [[ "$2" =~ ^[0-9]{1,9}$ ]] && ((10#$2 >= $3)) || die "$1 needs an integer >= $3, got '$2'"
  echo $((10#$2))
}

# Notes what --seeds must know of a flag passed through (as --NAME=VALUE): the output directory,
# the mode (the last --mode wins, as in the figure scripts), --records, a seed set by hand.
note_flag() {  # --NAME=VALUE
  case "$1" in
    --out=*) out="${1#--out=}" ;;
    --mode=*) mode="${1#--mode=}" ;;
    --records=*) records=1 ;;
    --set=seed=* | --set=seeds=*) seed_set="${1#--set=}" ;;
  esac
}

# One figure at one seed into OUT/seeds/seed=S/ (its figN.* and runs/ apart from the other seeds').
run_seed() {  # FIG SEED
  local dir="$out/seeds/seed=$2"
  mkdir -p "$dir" && rm -f "$dir/$1.checks.json"
  local flags=("${pass[@]}")
  [[ "$1" != fig4 ]] || flags+=("${fig4_flags[@]}")
  echo "== $1 seed=$2 ${flags[*]} --out $dir"
  "$PY" "$HERE/$1.py" "${flags[@]}" --out "$dir" --set "seed=$2"
}

# One figure at every seed, then its checks over the seeds (lib/seeds.py: the table, and
# OUT/figN.seeds.{csv,md}). Sets status[FIG]; returns 0 when the claim holds at every seed.
run_seeds() {  # FIG
  local fig="$1" s rc holding=0 failed=0 seeds=()
  for ((s = seed_base; s < seed_base + nseeds; s++)); do
    seeds+=("$s")
    run_seed "$fig" "$s"
    rc=$?
    case $rc in
      0) holding=$((holding + 1)) ;;
      1) ;;
      77) status[$fig]="not available yet"; return 1 ;;
      *) failed=$((failed + 1)) ;;
    esac
  done
  echo
  echo "== $fig: the checks over seeds ${seeds[0]}..${seeds[-1]}"
  "$PY" "$HERE/lib/seeds.py" "$fig" "$out" "${seeds[@]}" \
    --command "artifact/reproduce.sh $fig${pass[*]:+ ${pass[*]}}${outflag[*]:+ ${outflag[*]}}$seed_flags"
  rc=$?
  if ((holding == nseeds && rc == 0)); then
    status[$fig]="claim holds"
    return 0
  fi
  status[$fig]="holds at $holding/$nseeds seeds"
  ((failed == 0)) || status[$fig]+=", $failed failed"
  ((rc <= 1)) || status[$fig]+=", no table (exit $rc)"
  return 1
}

main() {
figs=()
pass=()
outflag=()
fig4_flags=()
out="${KF_ARTIFACT_OUT:-$HERE/out}"
mode=sim records="" seed_set="" nseeds="" seed_base=""
while (($#)); do
  case "$1" in
    all) figs+=(fig4 fig5 fig6 fig7 fig8 fig9) ;;
    fig[4-9]) figs+=("$1") ;;
    --quick) pass+=(--quick) ;;
    --seeds | --seed-base)
      (($# >= 2)) || die "$1 needs a value"
      if [[ "$1" == --seeds ]]; then nseeds="$2"; else seed_base="$2"; fi
      shift ;;
    --seeds=*) nseeds="${1#*=}" ;;
    --seed-base=*) seed_base="${1#*=}" ;;
    --out)
      (($# >= 2)) || usage
      outflag=("$1" "$2")
      note_flag "$1=$2"
      shift ;;
    --out=*) outflag=("$1"); note_flag "$1" ;;
    --model)
      (($# >= 2)) || usage
      [[ "$2" == mlp || "$2" == torch ]] || die "--model: mlp or torch, not '$2'"
      fig4_flags=(--model "$2")
      shift ;;
    --model=*)
      [[ "${1#*=}" == mlp || "${1#*=}" == torch ]] || die "--model: mlp or torch, not '${1#*=}'"
      fig4_flags=("$1") ;;
    --mode | --records | --build | --set)
      (($# >= 2)) || usage
      pass+=("$1" "$2")
      note_flag "$1=$2"
      shift ;;
    --mode=* | --records=* | --build=* | --set=*) pass+=("$1"); note_flag "$1" ;;
    -h | --help) usage ;;
    *) echo "reproduce.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
((${#figs[@]})) || usage
seed_flags=""
if [[ -n "$nseeds" ]]; then
  nseeds=$(int_flag --seeds "$nseeds" 1) || exit 2
  [[ "$mode" != real && -z "$records" ]] ||
    die "--seeds runs the simulated figures at several seeds: sim mode only, not with --mode real or --records"
  seed_flags=" --seeds $nseeds"
fi
if [[ -n "$seed_base" ]]; then
  seed_base=$(int_flag --seed-base "$seed_base" 0) || exit 2
  ((${nseeds:-1} > 1)) || die "--seed-base B goes with --seeds N > 1 (one run at seed B: --set seed=B)"
  seed_flags+=" --seed-base $seed_base"
fi
seed_base="${seed_base:-1}"
nseeds="${nseeds:-1}"
if ((nseeds > 1)) && [[ -n "$seed_set" ]]; then
  die "--set $seed_set with --seeds $nseeds: --seeds sets each run's seed (--seed-base B starts elsewhere)"
fi
if ! "$PY" -c 'import matplotlib, numpy' 2>/dev/null; then
  echo "reproduce.sh: $PY lacks matplotlib / numpy: apt-get install python3-matplotlib python3-numpy (./kf setup does)" >&2
  exit 1
fi

declare -A status seconds
worst=0
for fig in "${figs[@]}"; do
  start=$SECONDS
  if ((nseeds > 1)); then
    run_seeds "$fig" || worst=1
    seconds[$fig]=$((SECONDS - start))
    continue
  fi
  echo "== $fig ${pass[*]}${outflag[*]:+ ${outflag[*]}}"
  flags=("${pass[@]}")
  [[ "$fig" != fig4 ]] || flags+=("${fig4_flags[@]}")
  "$PY" "$HERE/$fig.py" "${flags[@]}" "${outflag[@]}"
  rc=$?
  seconds[$fig]=$((SECONDS - start))
  case $rc in
    0) status[$fig]="claim holds" ;;
    1) status[$fig]="CLAIM CONTRADICTED"; worst=1 ;;
    77) status[$fig]="not available yet"; worst=1 ;;
    *) status[$fig]="FAILED (exit $rc)"; worst=1 ;;
  esac
done

echo
printf '%-6s %-22s %8s\n' figure result "wall s"
for fig in "${figs[@]}"; do
  printf '%-6s %-22s %8s\n' "$fig" "${status[$fig]}" "${seconds[$fig]}"
done
exit $worst
}

# Read whole before running: editing this file while it runs cannot break the run.
main "$@"
exit $?
