#!/usr/bin/env bash
# Runs a figure's real-mode jobs across the cluster with kfrun -ssh, gathers every worker's
# records onto this VM, and checks the paper's claim on them with
# artifact/reproduce.sh FIG --mode real. Run it on the first VM (create-cluster.sh's).
#
#   deploy/run-figure.sh fig9 HOSTFILE [--nic eth0] [--out DIR]
#
# Scripted: fig9 (scaling: the first N VMs for N = 2, 4, 8, ... up to the hostfile's VMs, one
# worker per VM, ResNet-50 and MobileNetV2 profiles on K80). The other figures' commands are in
# artifact/README.md (real mode); run them with kfrun -ssh -hostfile the same way.
# Records go to DIR (default ~/records/FIG) on every VM and are copied here with rsync over SSH.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KFRUN="${KFRUN:-$ROOT/build/release/apps/kfrun}"
KFTRAIN="${KFTRAIN:-$ROOT/build/release/apps/kftrain}"
usage() {
  sed -n '6,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
(($# >= 2)) || usage
fig=$1 hostfile=$2
shift 2
nic=eth0 out=""
while (($#)); do
  case "$1" in
    --nic) (($# >= 2)) || usage; nic=$2; shift ;;
    --out) (($# >= 2)) || usage; out=$2; shift ;;
    *) echo "run-figure.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[[ -r "$hostfile" ]] || { echo "run-figure.sh: cannot read $hostfile" >&2; exit 2; }
out="${out:-$HOME/records/$fig}"
mapfile -t ips < <(awk '{ sub(/#.*/, "") } NF { print $1 }' "$hostfile")
((${#ips[@]} >= 2)) || { echo "run-figure.sh: $hostfile lists ${#ips[@]} VM(s); 2 or more needed" >&2; exit 2; }

# The first n VMs as -H, one slot each.
first_n() {
  local n=$1 i h=""
  for ((i = 0; i < n; i++)); do h="${h:+$h,}${ips[i]}:1"; done
  echo "$h"
}
gather() {
  local ip
  for ip in "${ips[@]}"; do
    rsync -a "$ip:$out/" "$out/" 2>/dev/null || echo "run-figure.sh: nothing from $ip" >&2
  done
}

case "$fig" in
  fig9)
    for model in resnet50 mobilenet_v2; do
      for ((n = 2; n <= ${#ips[@]}; n *= 2)); do
        echo "== fig9: $model on $n VMs"
        "$KFRUN" -ssh -np "$n" -H "$(first_n "$n")" -nic "$nic" -strategy BINARY_TREE_STAR \
          "$KFTRAIN" -model "$model" -device k80 -batch 32 -steps 20 -out "$out/$model/n=$n"
      done
    done
    ;;
  *)
    echo "run-figure.sh: $fig is not scripted; its commands are in artifact/README.md (real mode)" >&2
    exit 2
    ;;
esac
gather
exec "$ROOT/artifact/reproduce.sh" "$fig" --mode real --records "$out"
