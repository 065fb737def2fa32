# shellcheck shell=bash
# Shared by the network-namespace tests (source it): hosts as namespaces on a bridge that lives
# in a namespace of its own (the machine's own network is never touched), every link limited
# with tbf each way. Set TAG, N (namespaces), SUBNET ("10.77.0"), MTU and WORK first; the trap
# runs netns_cleanup. Host i has IP $SUBNET.(i+1). SWITCH_QUEUE (optional, tc's size syntax:
# 512kb) bounds each bridge port's drop-tail backlog; by default it is rate x 100 ms + burst.

# Best effort, and safe under `set -e` (it runs from EXIT traps): a job or a namespace's process
# that has already exited must not stop it before the namespaces are gone, or the next run finds
# them there and skips.
netns_cleanup() {
  local pid i
  for pid in $(jobs -p); do kill -9 "$pid" 2>/dev/null || true; done
  for i in $(seq 0 $((N - 1))); do
    ip netns pids "${TAG}n$i" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "${TAG}n$i" 2>/dev/null || true
  done
  ip netns del "${TAG}br" 2>/dev/null || true
  rm -rf "$WORK"
}

skip() {
  echo "SKIP: $*"
  exit 77
}

# netns_setup [RATE]: makes the bridge and N hosts, or skips (exit 77) where that is impossible.
# Without RATE the links are not shaped (no tc).
netns_setup() {
  local rate="${1:-}" br="${TAG}br"
  [[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
  command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
  [[ -z "$rate" ]] || command -v tc >/dev/null || skip "tc (iproute2) is not installed"
  ip netns add "$br" 2>"$WORK/err" || skip "cannot create a network namespace: $(cat "$WORK/err")"
  ip -n "$br" link add br0 type bridge || skip "cannot create a bridge"
  ip -n "$br" link set br0 up
  ip -n "$br" link set lo up
  for i in $(seq 0 $((N - 1))); do
    local ns="${TAG}n$i"
    ip netns add "$ns" || skip "cannot create namespace $ns"
    ip link add "${TAG}v$i" type veth peer name "${TAG}p$i" || skip "cannot create a veth pair"
    ip link set "${TAG}v$i" netns "$ns"
    ip link set "${TAG}p$i" netns "$br"
    ip -n "$ns" link set "${TAG}v$i" name eth0
    ip -n "$ns" link set eth0 mtu "$MTU"
    ip -n "$br" link set "${TAG}p$i" mtu "$MTU"
    ip -n "$ns" addr add "$SUBNET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    # Collectives pause between steps; do not fall back to slow start after each pause.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0 2>/dev/null
    ip -n "$br" link set "${TAG}p$i" master br0
    ip -n "$br" link set "${TAG}p$i" up
    [[ -n "$rate" ]] || continue
    # The host's egress and the bridge port's egress (the host's ingress).
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms ||
      skip "tc tbf is not available"
    if [[ -n "${SWITCH_QUEUE:-}" ]]; then
      tc -n "$br" qdisc add dev "${TAG}p$i" root tbf rate "$rate" burst 256kb limit "$SWITCH_QUEUE"
    else
      tc -n "$br" qdisc add dev "${TAG}p$i" root tbf rate "$rate" burst 256kb latency 100ms
    fi
  done
}
