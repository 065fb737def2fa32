#!/usr/bin/env bash
# Reproduces the OSDI'20 paper's figures 4-9 with this testbed (see artifact/README.md).
#
#   artifact/reproduce.sh figN|all [figM ...] [--mode sim|real] [--quick] [--records DIR]
#                         [--out DIR] [--build DIR] [--set KEY=VALUE ...]
#
# Each figure writes OUT/figN.{png,pdf,csv,md} (OUT: artifact/out, or $KF_ARTIFACT_OUT) and checks
# the paper's qualitative claim against its own numbers. Exit code: 0 every figure's claim holds;
# 1 otherwise (a claim contradicted, a run failed, or a figure not available yet), 2 bad usage.
# The build directory (apps/kfsim, kfrun, kftrain) is build/release unless --build or $KF_BUILD.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
PY=/usr/bin/python3

usage() { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

main() {
figs=()
pass=()
while (($#)); do
  case "$1" in
    all) figs+=(fig4 fig5 fig6 fig7 fig8 fig9) ;;
    fig[4-9]) figs+=("$1") ;;
    --quick) pass+=(--quick) ;;
    --mode | --records | --out | --build | --set)
      (($# >= 2)) || usage
      pass+=("$1" "$2")
      shift ;;
    --mode=* | --records=* | --out=* | --build=* | --set=*) pass+=("$1") ;;
    -h | --help) usage ;;
    *) echo "reproduce.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
((${#figs[@]})) || usage
if ! "$PY" -c 'import matplotlib, numpy' 2>/dev/null; then
  echo "reproduce.sh: $PY lacks matplotlib / numpy: apt-get install python3-matplotlib python3-numpy (./kf setup does)" >&2
  exit 1
fi

declare -A status seconds
worst=0
for fig in "${figs[@]}"; do
  echo "== $fig ${pass[*]}"
  start=$SECONDS
  "$PY" "$HERE/$fig.py" "${pass[@]}"
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
