#!/usr/bin/env bash
# The paper's figures, CI-sized: artifact/reproduce.sh FIG... --quick into a scratch directory,
# with the build under test. Passes when every figure's claim check holds and its
# figN.{png,pdf,csv,md} were written; skips (77) without Debian's python3-matplotlib.
#   artifact_quick_test.sh BUILD_DIR SOURCE_DIR [figN ...]   (default: fig5 fig9)
set -uo pipefail
build="$1"
src="$2"
shift 2
figs=("$@")
((${#figs[@]})) || figs=(fig5 fig9)
if ! /usr/bin/python3 -c 'import matplotlib, numpy' 2>/dev/null; then
  echo "skip: /usr/bin/python3 lacks python3-matplotlib / python3-numpy"
  exit 77
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
KF_BUILD="$build" KF_ARTIFACT_OUT="$out" bash "$src/artifact/reproduce.sh" "${figs[@]}" --quick
rc=$?
for fig in "${figs[@]}"; do
  for ext in png pdf csv md; do
    if [[ ! -s "$out/$fig.$ext" ]]; then
      echo "FAIL: $fig.$ext not written"
      rc=1
    fi
  done
  [[ -s "$out/$fig.md" ]] && cat "$out/$fig.md"
done
exit $rc
