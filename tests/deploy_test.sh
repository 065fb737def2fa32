#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# deploy/: what can run without a cloud.
#   deploy_test.sh scripts     every deploy script is clean by shellcheck (skipped without
#                              it); hostfile.sh turns az's JSON (a recorded sample,
#                              tests/data/deploy/) and plain IP lists into hostfiles kfrun reads,
#                              and refuses bad input with exit 2 naming it; create-cluster.sh
#                              --dry-run prints the az commands; cloud-init.yaml is valid YAML
#   deploy_test.sh preflight KFRUN KFBENCH
#                              check-cluster.sh on a hostfile made by hostfile.sh from the IPs
#                              of 3 namespaces with sshd (tests/ssh_cluster.sh): passes; with one
#                              host's sshd down it exits 2 naming that host (77 without root)
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DEPLOY="$HERE/../deploy"
WORK="$(mktemp -d)"
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

scripts() {
  trap 'rm -rf "$WORK"' EXIT
  if command -v shellcheck >/dev/null; then
    if shellcheck -x "$DEPLOY"/*.sh "$DEPLOY"/azure/*.sh; then
      echo "shellcheck: deploy/*.sh deploy/azure/*.sh clean"
    else
      fail "shellcheck"
    fi
  else
    echo "SKIP shellcheck: not installed (apt-get install shellcheck)"
  fi
  local got
  got="$("$DEPLOY/hostfile.sh" 4 "$HERE/data/deploy/az-vm-list-ip-addresses.json")" || fail "hostfile.sh on az JSON"
  [[ "$got" == $'10.0.0.4 slots=4\n10.0.0.5 slots=4\n10.0.0.6 slots=4' ]] || fail "hostfile from az JSON: $got"
  got="$(printf '# vms\n10.0.0.9\n\n10.0.0.8  # second\n' | "$DEPLOY/hostfile.sh" 1)" || fail "hostfile.sh on a list"
  [[ "$got" == $'10.0.0.9 slots=1\n10.0.0.8 slots=1' ]] || fail "hostfile from a list: $got"
  echo "hostfile.sh: az JSON (VMs in name order, private IPs) and plain lists"
  local bad
  for bad in "0|10.0.0.1" "x|10.0.0.1" "2|10.0.0.1\n10.0.0.1" "2|10.0.0.300" "2|" "2|[{\"virtualMachine\":{\"name\":\"a\",\"network\":{}}}]" "2|[{"; do
    local slots="${bad%%|*}" input="${bad#*|}" err code
    err="$(printf '%b' "$input" | "$DEPLOY/hostfile.sh" "$slots" 2>&1 >/dev/null)"
    code=$?
    [[ $code -eq 2 && "$err" == hostfile.sh:* ]] || fail "hostfile.sh $slots on '$input': exit $code, '$err'"
    echo "  refused: $err"
  done
  ssh-keygen -q -t ed25519 -N '' -f "$WORK/key" || fail ssh-keygen
  got="$(SSH_PUBLIC_KEY="$WORK/key.pub" "$DEPLOY/azure/create-cluster.sh" --group kft --count 3 \
    --repo https://example.invalid/kungfu.git --slots 2 --out "$WORK/cl" --dry-run)" ||
    fail "create-cluster.sh --dry-run"
  [[ $(grep -c '^az vm create' <<<"$got") -eq 3 ]] || fail "create-cluster.sh: not 3 VMs: $got"
  grep -q "accelerated-networking true" <<<"$got" || fail "no accelerated networking"
  grep -q "https://example.invalid/kungfu.git" "$WORK/cl/cloud-init.yaml" || fail "repository not filled in"
  echo "create-cluster.sh --dry-run: $(grep -c '^az ' <<<"$got") az commands, 3 VMs"
  if /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
    /usr/bin/python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); assert "runcmd" in d and "packages" in d' \
      "$WORK/cl/cloud-init.yaml" || fail "cloud-init.yaml is not valid YAML with packages and runcmd"
    echo "cloud-init.yaml: valid YAML"
  fi
  SSH_PUBLIC_KEY="$WORK/key.pub" "$DEPLOY/azure/create-cluster.sh" --group kft --count 0 --repo x \
    --dry-run >/dev/null 2>&1
  [[ $? -eq 2 ]] || fail "create-cluster.sh --count 0 not refused"
  "$DEPLOY/azure/delete-cluster.sh" --group kft --dry-run | grep -q "az group delete --name kft" ||
    fail "delete-cluster.sh --dry-run"
}

preflight() {
  local kfrun=$1 kfbench=$2
  N=3
  TAG="kfd$$"
  SUBNET=10.81.0
  source "$HERE/ssh_cluster.sh"
  trap ssh_cluster_stop EXIT INT TERM
  ssh_cluster_start
  local i
  for i in 0 1 2; do host_ip "$i"; done >"$WORK/ips"
  "$DEPLOY/hostfile.sh" 2 "$WORK/ips" >"$WORK/hosts.txt" || fail "hostfile.sh"
  lease_ports 4
  local flags=(-ssh-config "$SSH_CONFIG" -nic eth0 -port-range "$PORT_BASE-$((PORT_BASE + 1))")
  KFRUN="$kfrun" KFBENCH="$kfbench" KUNGFU_SECRET=deploy-test \
    ip netns exec "$(host_ns 0)" "$DEPLOY/check-cluster.sh" "$WORK/hosts.txt" "${flags[@]}" \
    >"$WORK/ok.log" 2>&1
  local code=$?
  if [[ $code -ne 0 ]]; then
    cat "$WORK/ok.log"
    fail "check-cluster.sh on 3 namespaces exited $code"
  else
    echo "check-cluster.sh on 3 namespaces (6 workers): $(grep 'Avg bus bandwidth\|Out of bounds' "$WORK/ok.log" | tr '\n' ' ')"
  fi
  ssh_host_down 2
  KFRUN="$kfrun" KFBENCH="$kfbench" ip netns exec "$(host_ns 0)" "$DEPLOY/check-cluster.sh" \
    "$WORK/hosts.txt" "${flags[@]}" >"$WORK/down.log" 2>&1
  code=$?
  if [[ $code -ne 2 ]] || ! grep -q "host $(host_ip 2): cannot reach it over SSH" "$WORK/down.log"; then
    cat "$WORK/down.log"
    fail "check-cluster.sh with host 3's sshd down: exit $code"
  else
    echo "host 3's sshd down: $(grep "host $(host_ip 2)" "$WORK/down.log")"
  fi
}

case "${1:-}" in
  scripts) scripts ;;
  preflight) (($# == 3)) || { echo "usage: deploy_test.sh preflight KFRUN KFBENCH" >&2; exit 2; }; preflight "$2" "$3" ;;
  *) echo "usage: deploy_test.sh scripts | preflight KFRUN KFBENCH" >&2; exit 2 ;;
esac
((failed == 0)) || exit 1
echo PASS
