#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# bench/peers.sh in small: kfbench, Gloo and Open MPI at 2 ranks on this host, over TCP (host) and
# each through its one-host path (local), no namespaces, three small sizes: peers.csv has a row
# for every system that is built, both worlds and every size, each with p50 > 0 and busbw > 0 and
# no note; README.md and peers.png are written; a bad argument (a rank count, a world, a size) is
# refused (exit 2) before anything is written. Skips (exit 77) when neither Gloo's nor MPI's
# program is built (apt-get install libgloo-dev libopenmpi-dev openmpi-bin, then rebuild).
#   tests/peers_bench_test.sh BUILD_DIR OUT_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$1"
out="$2"
rm -rf "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }

systems=kfbench
[[ -x "$build/bench/gloo_allreduce" ]] && systems+=",gloo"
[[ -x "$build/bench/mpi_allreduce" ]] && command -v mpirun >/dev/null && systems+=",mpi"
if [[ "$systems" == kfbench ]]; then
  echo "SKIP: neither bench/gloo_allreduce nor bench/mpi_allreduce (with mpirun) is built"
  exit 77
fi

rc=0
err="$(bash "$here/bench/peers.sh" "$build" --out "$out" --ranks 1 2>&1)" || rc=$?
[[ $rc -eq 2 && "$err" == *"--ranks"* ]] || fail "--ranks 1: exit $rc ($err), expected 2"
[[ ! -e "$out" ]] || fail "--ranks 1: it wrote $out"
rc=0
err="$(bash "$here/bench/peers.sh" "$build" --out "$out" --worlds host,moon 2>&1)" || rc=$?
[[ $rc -eq 2 && "$err" == *"--worlds: unknown world 'moon'"* ]] ||
  fail "--worlds host,moon: exit $rc ($err), expected 2"
[[ ! -e "$out" ]] || fail "--worlds host,moon: it wrote $out"
for bad in 8x 6 K; do
  rc=0
  err="$(bash "$here/bench/peers.sh" "$build" --out "$out" --sizes "8,$bad" 2>&1)" || rc=$?
  [[ $rc -eq 2 && "$err" == *"--sizes: '$bad' is not a multiple of 4 bytes"* ]] ||
    fail "--sizes 8,$bad: exit $rc ($err), expected 2"
  [[ ! -e "$out" ]] || fail "--sizes 8,$bad: it wrote $out"
done

# shellcheck source=port_lease.sh disable=SC1091  # followed with shellcheck -x
source "$here/tests/port_lease.sh"
lease_ports 16
export KF_PEERS_PORT="$PORT_BASE" KF_PEERS_RUN_TIMEOUT=40
bash "$here/bench/peers.sh" "$build" --quick --worlds host,local --ranks 2 --sizes 8,4K,64K \
  --iters 10 --warmup 2 --systems "$systems" --out "$out" || fail "bench/peers.sh exited non-zero"

/usr/bin/python3 - "$out/peers.csv" "$systems" <<'PY' || fail "peers.csv"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
worlds = ("host", "local")
want = {(s, w, b) for s in sys.argv[2].split(",") for w in worlds for b in (8, 4096, 65536)}
got = {}
for r in rows:
    if r["note"] or not r["p50_us"]:
        sys.exit(f"a row without figures: {r}")
    key = (r["system"], r["where"], int(r["bytes"]))
    if key in got:
        sys.exit(f"two rows for {key}")
    got[key] = r
    if (r["ranks"], r["iterations"]) != ("2", "10"):
        sys.exit(f"unexpected ranks/iterations: {r}")
    p50, busbw = float(r["p50_us"]), float(r["busbw_GBps"])
    if not (0 < p50 < 1e7 and 0 < busbw < 1e3 and float(r["mean_us"]) > 0):
        sys.exit(f"not a sane figure: {r}")
if set(got) != want:
    sys.exit(f"rows for {sorted(set(got))}, expected {sorted(want)}")
for s in sys.argv[2].split(","):
    for w in worlds:
        print(f"  {s}, {w}: " + ", ".join(f"{b} B p50 {float(got[(s, w, b)]['p50_us']):.1f} us"
                                          for b in (8, 4096, 65536)))
PY
grep -q '^## 2 ranks, host' "$out/README.md" || fail "README.md has no 2-ranks host table"
grep -q '^## 2 ranks, local' "$out/README.md" || fail "README.md has no 2-ranks local table"
[[ -s "$out/peers.png" ]] || fail "no peers.png"
echo "peers_bench: ok ($systems)"
