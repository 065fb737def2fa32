#!/usr/bin/env bash
# Deletes everything create-cluster.sh made: the resource group and all in it.
#   deploy/azure/delete-cluster.sh --group RG [--dry-run]
set -euo pipefail
group="" dry=0
while (($#)); do
  case "$1" in
    --group) (($# >= 2)) || { echo "delete-cluster.sh: --group needs a value" >&2; exit 2; }; group=$2; shift ;;
    --dry-run) dry=1 ;;
    *) echo "delete-cluster.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$group" ]] || { echo "usage: deploy/azure/delete-cluster.sh --group RG [--dry-run]" >&2; exit 2; }
cmd=(az group delete --name "$group" --yes --no-wait)
if ((dry)); then printf '%q ' "${cmd[@]}"; echo; else "${cmd[@]}"; fi
