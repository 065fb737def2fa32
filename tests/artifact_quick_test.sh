#!/usr/bin/env bash
# The paper's figures, CI-sized: artifact/reproduce.sh FIG... --quick into a scratch directory,
# with the build under test, then fig9 --quick --seeds 2 (each check over seeds 1 and 2). Passes
# when every figure's claim check holds, its figN.{png,pdf,csv,md} were written and fig9.seeds.csv
# counts both seeds for every check; skips (77) without Debian's python3-matplotlib.
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

# --seeds: fig9 at seeds 1 and 2 (OUT/seeds/seed=S/), then the table over them (about 2x fig9).
KF_BUILD="$build" KF_ARTIFACT_OUT="$out" bash "$src/artifact/reproduce.sh" fig9 --quick --seeds 2 || rc=1
for seed in 1 2; do
  if [[ ! -s "$out/seeds/seed=$seed/fig9.checks.json" ]]; then
    echo "FAIL: seeds/seed=$seed/fig9.checks.json not written"
    rc=1
  fi
done
/usr/bin/python3 - "$out/fig9.seeds.csv" <<'EOF' || rc=1
import csv, sys
with open(sys.argv[1]) as f:
    rows = list(csv.DictReader(f))
bad = [r["name"] for r in rows if r["seeds"] != "2" or r["seeds_holding"] != "2" or not r["value_ci95_low"]]
if not rows or bad:
    sys.exit(f"FAIL: {sys.argv[1]}: {len(rows)} checks; not counted / holding at 2 seeds with an interval: {bad}")
print(f"fig9.seeds.csv: {len(rows)} checks, each holding at 2 of 2 seeds")
EOF
if [[ -s "$out/fig9.seeds.md" ]]; then
  cat "$out/fig9.seeds.md"
else
  echo "FAIL: fig9.seeds.md not written"
  rc=1
fi
exit $rc
