#!/usr/bin/env bash
# Creates N GPU VMs on Azure for the real-mode runs, with the Azure CLI (az login first):
# a resource group, a virtual network, a proximity placement group, N VMs with accelerated
# networking set up by cloud-init.yaml (driver, CUDA, NCCL, this repository built in
# /opt/kungfu), a cluster SSH key with which the first VM reaches every VM (kfrun -ssh), and the
# hostfile of the VMs' private IPs (hostfile.sh) at /opt/kungfu/hosts.txt on the first VM and in
# OUT/hosts.txt here. Only the first VM has a public IP; reach the others through it.
#
#   deploy/azure/create-cluster.sh --group RG --count N [--size Standard_NC6s_v3]
#       [--location eastus] [--image Debian:debian-12:12-gen2:latest] [--slots 1]
#       --repo URL [--ref BRANCH] [--admin kf] [--out DIR] [--dry-run]
#
# --slots: workers per VM (its GPUs). --dry-run prints the az commands instead of running them.
# Delete everything with deploy/azure/delete-cluster.sh --group RG.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
group="" count="" size=Standard_NC6s_v3 location=eastus image=Debian:debian-12:12-gen2:latest
slots=1 repo="" ref=main admin=kf out="" dry=0

usage() {
  sed -n '9,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while (($#)); do
  case "$1" in
    --group | --count | --size | --location | --image | --slots | --repo | --ref | --admin | --out)
      (($# >= 2)) || usage
      declare "${1#--}=$2"
      shift ;;
    --dry-run) dry=1 ;;
    -h | --help) usage ;;
    *) echo "create-cluster.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[[ -n "$group" ]] || { echo "create-cluster.sh: --group is required" >&2; usage; }
[[ -n "$repo" ]] || { echo "create-cluster.sh: --repo is required (the URL the VMs clone this repository from)" >&2; usage; }
[[ "$count" =~ ^[1-9][0-9]*$ ]] || { echo "create-cluster.sh: --count '$count': expected a positive integer" >&2; exit 2; }
[[ "$slots" =~ ^[1-9][0-9]*$ ]] || { echo "create-cluster.sh: --slots '$slots': expected a positive integer" >&2; exit 2; }
out="${out:-$PWD/cluster-$group}"
mkdir -p "$out"
((dry)) || command -v az >/dev/null || { echo "create-cluster.sh: the Azure CLI (az) is not installed" >&2; exit 2; }

run() {
  if ((dry)); then printf '%q ' "$@"; echo; else "$@"; fi
}

# The cloud-init file with the repository filled in.
sed -e "s|@REPO@|$repo|g" -e "s|@REF@|$ref|g" "$HERE/cloud-init.yaml" >"$out/cloud-init.yaml"
# The cluster key: the first VM uses it to reach every VM.
[[ -f "$out/cluster_key" ]] || ssh-keygen -q -t ed25519 -N '' -C "kungfu-$group" -f "$out/cluster_key"
user_key="${SSH_PUBLIC_KEY:-$HOME/.ssh/id_ed25519.pub}"
[[ -r "$user_key" ]] || { echo "create-cluster.sh: no public key at $user_key (set SSH_PUBLIC_KEY)" >&2; exit 2; }
cat "$user_key" "$out/cluster_key.pub" >"$out/authorized_keys"

run az group create --name "$group" --location "$location" --output none
run az ppg create --resource-group "$group" --name "$group-ppg" --location "$location" \
  --type Standard --output none
run az network vnet create --resource-group "$group" --name "$group-vnet" \
  --address-prefixes 10.0.0.0/16 --subnet-name workers --subnet-prefixes 10.0.0.0/24 --output none
for i in $(seq 0 $((count - 1))); do
  public=()
  ((i == 0)) || public=(--public-ip-address "")
  run az vm create --resource-group "$group" --name "$group-vm$i" --image "$image" \
    --size "$size" --ppg "$group-ppg" --vnet-name "$group-vnet" --subnet workers \
    --accelerated-networking true --admin-username "$admin" \
    --ssh-key-values "$out/authorized_keys" --custom-data "$out/cloud-init.yaml" \
    "${public[@]}" --output none --no-wait
done
for i in $(seq 0 $((count - 1))); do
  run az vm wait --resource-group "$group" --name "$group-vm$i" --created
done
if ((dry)); then
  echo "# then: az vm list-ip-addresses -g $group -o json | deploy/hostfile.sh $slots >$out/hosts.txt"
  exit 0
fi
az vm list-ip-addresses --resource-group "$group" --output json >"$out/ip-addresses.json"
"$HERE/../hostfile.sh" "$slots" "$out/ip-addresses.json" >"$out/hosts.txt"
first="$(az vm list-ip-addresses --resource-group "$group" --name "$group-vm0" \
  --query '[0].virtualMachine.network.publicIpAddresses[0].ipAddress' --output tsv)"
echo "$first" >"$out/first-vm"
ssh_first=(ssh -o StrictHostKeyChecking=accept-new "$admin@$first")
# cloud-init builds on every VM; wait for all (through the first VM).
"${ssh_first[@]}" true
scp -o StrictHostKeyChecking=accept-new "$out/cluster_key" "$admin@$first:.ssh/id_ed25519"
while read -r ip _; do
  echo "waiting for $ip (cloud-init: driver, CUDA, NCCL, ./kf setup)..."
  "${ssh_first[@]}" ssh -o StrictHostKeyChecking=accept-new "$ip" \
    "'cloud-init status --wait >/dev/null; test -f /var/lib/kungfu-ready || { tail -20 /var/log/kungfu-setup.log; exit 1; }'"
done <"$out/hosts.txt"
scp "$out/hosts.txt" "$admin@$first:/tmp/hosts.txt"
"${ssh_first[@]}" "sudo cp /tmp/hosts.txt /opt/kungfu/hosts.txt"
echo "cluster ready: ssh $admin@$first; hostfile /opt/kungfu/hosts.txt:"
cat "$out/hosts.txt"
echo "next: ssh $admin@$first /opt/kungfu/deploy/check-cluster.sh /opt/kungfu/hosts.txt -nic eth0"
