#!/usr/bin/env bash
# bidir.py between 2 namespaces with tests/netns_lib.sh's 10 Gbit/s tbf links (MTU 9000), as
# bench/peers.sh makes them: one connection against two (16 MiB each way, in one exchange), then
# the same bytes in 2 and 16 sequential exchanges (two connections). Root. Run from the
# repository root; writes exchange.csv here (run,mode,phases,bytes,p50_ms,min_ms,max_ms).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC2034  # N, MTU and WORK are read by tests/netns_lib.sh
TAG=kfbd N=2 SUBNET=10.79.0 MTU=9000 WORK=$(mktemp -d)
# shellcheck source=../../../tests/netns_lib.sh disable=SC1091
source tests/netns_lib.sh
trap netns_cleanup EXIT
netns_setup 10gbit
out=$here/exchange.csv
echo "run,mode,phases,bytes,p50_ms,min_ms,max_ms" > "$out"
one() {  # RUN MODE PHASES
  ip netns exec ${TAG}n1 /usr/bin/python3 "$here/bidir.py" "$2" b "$SUBNET.1" 16777216 30 "$3" &
  echo "$1,$(ip netns exec ${TAG}n0 /usr/bin/python3 "$here/bidir.py" "$2" a "$SUBNET.2" \
    16777216 30 "$3")" >> "$out"
  wait
}
for r in 1 2 3; do
  one "$r" one 1; one "$r" two 1; one "$r" two 2; one "$r" two 16
done
cat "$out"
