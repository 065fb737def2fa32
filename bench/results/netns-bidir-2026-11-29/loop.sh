#!/usr/bin/env bash
# bidir.py between 2 namespaces (tests/netns_lib.sh, 10 Gbit/s tbf, MTU 9000), 16 MiB each way:
# two blocking threads against one thread polling both directions (an event loop, as kfbench's
# transport has), over one connection and two, and the loop's write size per call and whether a
# read event reads until EAGAIN (BIDIR_WRITE_CAP, BIDIR_READ_DRAIN). Root; run from the
# repository root. Prints: run,tag,mode,phases,bytes,p50_ms,min_ms,max_ms.
#   loop.sh [CASE...]   a CASE is CONNECTIONS,threads|loop[,WRITE_CAP[,DRAIN]] (e.g.
#                       one,loop,524288,1), each run three times; none: the sets below.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC2034  # N, MTU and WORK are read by tests/netns_lib.sh
TAG=kflp N=2 SUBNET=10.75.0 MTU=9000 WORK=$(mktemp -d)
# shellcheck source=../../../tests/netns_lib.sh disable=SC1091
source tests/netns_lib.sh
trap netns_cleanup EXIT
netns_setup 10gbit
one() {  # RUN CONNECTIONS threads|loop [WRITE_CAP] [DRAIN]
  export BIDIR_WRITE_CAP=${4:-1099511627776} BIDIR_READ_DRAIN=${5:-0}
  ip netns exec ${TAG}n1 /usr/bin/python3 "$here/bidir.py" "$2" b "$SUBNET.1" 16777216 30 1 "$3" &
  echo "$1,$2-$3-w${4:-all}-d${5:-0},$(ip netns exec ${TAG}n0 /usr/bin/python3 "$here/bidir.py" \
    "$2" a "$SUBNET.2" 16777216 30 1 "$3")"
  wait
}
if (($#)); then
  for r in 1 2 3; do
    for c in "$@"; do
      IFS=, read -r -a f <<<"$c"
      one "$r" "${f[@]}"
    done
  done
  exit 0
fi
for r in 1 2 3; do
  one "$r" two threads
  one "$r" two loop
  one "$r" two loop 1099511627776 1
  for cap in 1048576 524288 262144 65536; do one "$r" two loop "$cap" 1; done
  one "$r" one loop
done
