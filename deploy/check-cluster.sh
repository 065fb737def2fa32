#!/usr/bin/env bash
# Checks a cluster before the real runs: kfrun -ssh's pre-flight on every host of HOSTFILE
# (reachable over SSH, the same kfrun build, the worker ports free, -nic present), then a small
# checked allreduce (kfbench, 1 MiB to 64 MiB) over all its slots. Run it on the first VM.
#
#   deploy/check-cluster.sh HOSTFILE [kfrun flags ...]      e.g. -nic eth0
#
# KFRUN and KFBENCH name the programs (default: this repository's build/release/apps/); they
# must be at the same path on every host. Exit code: kfrun's (0: the cluster works; 2: the
# pre-flight failed, each problem named; else the allreduce failed).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KFRUN="${KFRUN:-$ROOT/build/release/apps/kfrun}"
KFBENCH="${KFBENCH:-$ROOT/build/release/apps/kfbench}"
(($# >= 1)) || { sed -n '6,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
hostfile=$1
shift
[[ -r "$hostfile" ]] || { echo "check-cluster.sh: cannot read $hostfile" >&2; exit 2; }
for p in "$KFRUN" "$KFBENCH"; do
  [[ -x "$p" ]] || { echo "check-cluster.sh: $p is not an executable (build it: ./kf setup)" >&2; exit 2; }
done
# Every slot of the hostfile.
np="$(awk '{ sub(/#.*/, "") } NF { n += (match($0, /slots=[0-9]+/) ? substr($0, RSTART + 6, RLENGTH - 6) : 1) } END { print n + 0 }' "$hostfile")"
((np > 0)) || { echo "check-cluster.sh: $hostfile lists no host" >&2; exit 2; }
echo "check-cluster.sh: $np workers on $(grep -cv '^\s*\(#\|$\)' "$hostfile") hosts"
exec "$KFRUN" -ssh -hostfile "$hostfile" -np "$np" -timeout 5m "$@" \
  "$KFBENCH" allreduce -b 1M -e 64M -f 8 -n 5 -w 1 -c 1
