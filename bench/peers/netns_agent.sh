#!/usr/bin/env bash
# mpirun's remote-shell agent for bench/peers.sh (--mca plm_rsh_agent): mpirun runs it as ssh,
#   netns_agent.sh HOST COMMAND...
# and it runs COMMAND, joined by spaces as ssh joins them, under /bin/sh in HOST's network
# namespace instead of on another machine. HOST is an address $KF_PEERS_SUBNET.(i+1); its
# namespace is ${KF_PEERS_NETNS}n$i (tests/netns_lib.sh's names).
set -euo pipefail
host="$1"
shift
last="${host##*.}"
[[ "$host" == "$KF_PEERS_SUBNET".* && "$last" =~ ^[0-9]+$ && "$last" -ge 1 ]] || {
  echo "netns_agent: no namespace for host '$host'" >&2
  exit 255
}
exec ip netns exec "${KF_PEERS_NETNS}n$((last - 1))" /bin/sh -c "$*"
