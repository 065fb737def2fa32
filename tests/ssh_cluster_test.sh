#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The SSH test cluster itself (tests/ssh_cluster.sh): 2 namespaces, each with its own sshd; from
# host 0 a login to each host lands in that host's namespace (it sees its own address), with no
# prompt; stopping host 1's sshd makes logins to it fail; afterwards no namespace, process or
# file of the cluster is left. Skips (77) without root or sshd.
#   ssh_cluster_test.sh
set -uo pipefail
if [[ "${1:-}" != --inner ]]; then
  tag="kfc$$"
  bash "$0" --inner "$tag"
  code=$?
  [[ $code -eq 0 ]] || exit $code
  if ip netns list 2>/dev/null | grep -q "^$tag"; then
    echo "FAIL: namespaces left behind: $(ip netns list | grep "^$tag" | tr '\n' ' ')"
    exit 1
  fi
  echo "cleanup: no ${tag}* namespace left"
  echo PASS
  exit 0
fi
N=2
TAG="$2"
SUBNET=10.79.0
WORK="$(mktemp -d)"
source "$(dirname "$0")/ssh_cluster.sh"
trap ssh_cluster_stop EXIT INT TERM
t0=$SECONDS
ssh_cluster_start
echo "cluster of $N hosts up in $((SECONDS - t0)) s, sshd on port $SSH_PORT"
for i in 0 1; do
  seen="$(on_host 0 ssh -F "$SSH_CONFIG" "$(host_ip "$i")" ip -4 -o addr show dev eth0)"
  [[ "$seen" == *"$(host_ip "$i")/24"* ]] || { echo "FAIL: host $i sees '$seen'"; exit 1; }
done
echo "logins from host 0 reach hosts 0 and 1 in their own namespaces"
ssh_host_down 1
if on_host 0 ssh -F "$SSH_CONFIG" "$(host_ip 1)" true 2>"$WORK/err"; then
  echo "FAIL: a login to host 1 worked with its sshd down"
  exit 1
fi
echo "host 1 down: $(cat "$WORK/err")"
[[ -z "$(host_processes 0)" ]] || { echo "FAIL: stray processes: $(host_processes 0)"; exit 1; }
exit 0
