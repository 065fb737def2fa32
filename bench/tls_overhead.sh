#!/usr/bin/env bash
# The cost of TLS on the data plane (KUNGFU_TLS=1): kfbench allreduce between two pseudo-hosts on
# loopback (127.0.0.1 and 127.0.0.2, one worker each, so the workers meet over TCP), with and
# without TLS, alternated run by run (plain first on odd repetitions, TLS first on even ones) so
# that a drifting machine weighs on both alike. A throw-away CA and worker certificate are made
# with the openssl CLI for the run and removed after it.
# Usage: bench/tls_overhead.sh [BUILD_DIR] [OUT_DIR] [REPS]
#   defaults: build/release, out/tls_overhead, 5
# Environment: KF_TLS_BENCH_PORT (default 23000) is the first worker port; KF_TLS_BENCH_ARGS
# replaces the kfbench arguments (default: allreduce -b 1M -e 64M -f 8 -n 20 -w 5
# -strategy RING_RS_AG).
# Writes OUT_DIR/results.csv (rep, mode, bytes, time_us, p50_us, p99_us, busbw_gbps, cpu_s: user +
# system seconds of both runners and their workers, the whole run) and OUT_DIR/summary.json
# (medians per mode and size, and TLS against plain).
set -euo pipefail
BUILD=${1:-build/release}
OUT=${2:-out/tls_overhead}
REPS=${3:-5}
PORT=${KF_TLS_BENCH_PORT:-23000}
read -r -a ARGS <<<"${KF_TLS_BENCH_ARGS:-allreduce -b 1M -e 64M -f 8 -n 20 -w 5 -strategy RING_RS_AG}"
KFRUN="$BUILD/apps/kfrun"
KFBENCH="$BUILD/apps/kfbench"
for f in "$KFRUN" "$KFBENCH"; do
  [[ -x "$f" ]] || { echo "tls_overhead: $f missing: build it first" >&2; exit 2; }
done
command -v openssl >/dev/null || { echo "tls_overhead: needs the openssl CLI" >&2; exit 2; }
mkdir -p "$OUT"
PKI=$(mktemp -d)
trap 'rm -rf "$PKI"' EXIT

# The job's CA, and one certificate for every worker (both pseudo-hosts), EC P-256.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -subj "/CN=kf-bench-ca" -addext "basicConstraints=critical,CA:TRUE" \
  -addext "keyUsage=critical,keyCertSign" -keyout "$PKI/ca.key" -out "$PKI/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=kf-worker" \
  -keyout "$PKI/worker.key" -out "$PKI/worker.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,IP:127.0.0.2\nextendedKeyUsage=serverAuth,clientAuth\n' \
  >"$PKI/ext.cnf"
openssl x509 -req -in "$PKI/worker.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial \
  -days 1 -extfile "$PKI/ext.cnf" -out "$PKI/worker.pem" 2>/dev/null

export KUNGFU_SECRET=tls-overhead-bench  # two hosts: kfrun makes no secret of its own
HOSTS="127.0.0.1:1,127.0.0.2:1"
RANGE="$PORT-$((PORT + 10))"

# One run: both pseudo-hosts' runners; rank 0's JSON report and the CPU seconds of the two.
run() {  # MODE REP
  local mode=$1 rep=$2 tls=()
  if [[ $mode == tls ]]; then
    tls=(KUNGFU_TLS=1 KUNGFU_TLS_CERT="$PKI/worker.pem" KUNGFU_TLS_KEY="$PKI/worker.key"
         KUNGFU_TLS_CA="$PKI/ca.pem")
  fi
  env "${tls[@]}" /usr/bin/time -f "%U %S" -o "$PKI/cpu2" timeout -k 5 300 "$KFRUN" -q -np 2 \
    -H "$HOSTS" -self 127.0.0.2 -port-range "$RANGE" "$KFBENCH" "${ARGS[@]}" >/dev/null 2>&1 &
  local other=$!
  env "${tls[@]}" /usr/bin/time -f "%U %S" -o "$PKI/cpu1" timeout -k 5 300 "$KFRUN" -q -np 2 \
    -H "$HOSTS" -self 127.0.0.1 -port-range "$RANGE" -v=false "$KFBENCH" "${ARGS[@]}" --json \
    >"$PKI/report.json" 2>"$PKI/stderr.txt" || { cat "$PKI/stderr.txt" >&2; exit 1; }
  wait "$other"
  python3 - "$mode" "$rep" "$PKI/report.json" "$PKI/cpu1" "$PKI/cpu2" >>"$OUT/results.csv" <<'EOF'
import json, sys
mode, rep, report, *cpu = sys.argv[1:]
text = open(report).read()
rows = json.loads(text[text.index("{"):text.rindex("}") + 1])["rows"]
cpu_s = sum(float(x) for f in cpu for x in open(f).read().split()[:2])
for r in rows:
    assert r["wrong"] == 0, f"{mode} run {rep}: {r['wrong']} wrong elements"
    print(f"{rep},{mode},{r['bytes']},{r['time_us']:.1f},{r['p50_us']:.1f},{r['p99_us']:.1f},"
          f"{r['busbw_gbps']:.4f},{cpu_s:.2f}")
EOF
}

echo "rep,mode,bytes,time_us,p50_us,p99_us,busbw_gbps,cpu_s" >"$OUT/results.csv"
for rep in $(seq 1 "$REPS"); do
  if ((rep % 2 == 1)); then order="plain tls"; else order="tls plain"; fi
  for mode in $order; do
    run "$mode" "$rep"
    echo "rep $rep $mode: $(tail -1 "$OUT/results.csv")"
  done
done

python3 - "$OUT" <<'EOF'
import csv, json, statistics, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/results.csv")))
summary = {}
for size in sorted({int(r["bytes"]) for r in rows}):
    cell = {}
    for mode in ("plain", "tls"):
        got = [r for r in rows if r["mode"] == mode and int(r["bytes"]) == size]
        cell[mode] = {k: statistics.median(float(r[k]) for r in got)
                      for k in ("time_us", "p50_us", "busbw_gbps", "cpu_s")}
        cell[mode]["runs"] = len(got)
    cell["tls_time_ratio"] = cell["tls"]["time_us"] / cell["plain"]["time_us"]
    cell["tls_busbw_ratio"] = cell["tls"]["busbw_gbps"] / cell["plain"]["busbw_gbps"]
    summary[str(size)] = cell
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
print(f"{'bytes':>10} {'plain us':>10} {'tls us':>10} {'plain GB/s':>10} {'tls GB/s':>9} {'tls/plain time':>14}")
for size, c in summary.items():
    print(f"{size:>10} {c['plain']['time_us']:>10.0f} {c['tls']['time_us']:>10.0f} "
          f"{c['plain']['busbw_gbps']:>10.3f} {c['tls']['busbw_gbps']:>9.3f} "
          f"{c['tls_time_ratio']:>14.2f}")
EOF
