#!/usr/bin/env bash
# TCP's own view (ss -tin, 12 snapshots 0.4 s apart, from the first namespace) of kfbench's
# 16 MiB allreduce at 2 ranks and of bidir.py's exchange of the same bytes, between 2 namespaces
# with tests/netns_lib.sh's 10 Gbit/s tbf links. Root; run from the repository root. Writes
# ss-kfbench.txt, ss-exchange.txt and kfbench.out here.
set -euo pipefail
out="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC2034  # N, MTU and WORK are read by tests/netns_lib.sh
TAG=kfss N=2 SUBNET=10.78.0 MTU=9000 WORK=$(mktemp -d)
# shellcheck source=../../../tests/netns_lib.sh disable=SC1091
source tests/netns_lib.sh
trap netns_cleanup EXIT
netns_setup 10gbit
B=build/release/apps
sample() {
  for _ in $(seq 1 12); do
    sleep 0.4
    ip netns exec ${TAG}n0 ss -tin state established
  done >"$out/$1"
}
hosts="$SUBNET.1:1,$SUBNET.2:1"
for i in 0 1; do
  ip netns exec ${TAG}n$i timeout 120 $B/kfrun -q -v=false -np 2 -H "$hosts" \
    -self "$SUBNET.$((i + 1))" -port-range 26000-26009 -runner-port 26010 \
    $B/kfbench allreduce -b 16M -e 16M -n 150 -w 5 -c 0 >"$WORK/kf$i.out" 2>&1 &
done
sleep 1.5
sample ss-kfbench.txt
wait
cp "$WORK/kf0.out" "$out/kfbench.out"
ip netns exec ${TAG}n1 /usr/bin/python3 "$out/bidir.py" two b "$SUBNET.1" 16777216 200 1 &
ip netns exec ${TAG}n0 /usr/bin/python3 "$out/bidir.py" two a "$SUBNET.2" 16777216 200 1 &
sleep 1.5
sample ss-exchange.txt
wait
