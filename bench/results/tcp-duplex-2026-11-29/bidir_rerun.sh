#!/usr/bin/env bash
# netns-bidir-2026-11-29's bidir.py, one thread polling both directions, 16 MiB both ways between
# 2 namespaces, writing at most 512 KiB per call and reading until EAGAIN (as the transport
# does): two connections against one, and one writing all the socket takes. Root, from the
# repository root. Prints run,tag,mode,phases,bytes,p50_ms,min_ms,max_ms (bidir_rerun.csv).
set -euo pipefail
here="$(cd "$(dirname "$0")/../netns-bidir-2026-11-29" && pwd)"
# shellcheck disable=SC2034  # N, MTU and WORK are read by tests/netns_lib.sh
TAG=kfdq N=2 SUBNET=10.76.0 MTU=9000 WORK=$(mktemp -d)
# shellcheck source=../../../tests/netns_lib.sh disable=SC1091
source tests/netns_lib.sh
trap netns_cleanup EXIT
netns_setup 10gbit
one() {
  export BIDIR_WRITE_CAP=${4:-1099511627776} BIDIR_READ_DRAIN=${5:-0}
  ip netns exec ${TAG}n1 /usr/bin/python3 "$here/bidir.py" "$2" b "$SUBNET.1" 16777216 30 1 "$3" &
  echo "$1,$2-$3-w${4:-all}-d${5:-0},$(ip netns exec ${TAG}n0 /usr/bin/python3 "$here/bidir.py" \
    "$2" a "$SUBNET.2" 16777216 30 1 "$3")"
  wait
}
for r in 1 2 3; do
  one "$r" two loop 524288 1
  one "$r" one loop 524288 1
  one "$r" one loop 1099511627776 1
done
