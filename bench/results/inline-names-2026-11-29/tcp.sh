#!/bin/bash
# Between two loopback pseudo-hosts (TCP): a small message with nothing queued before it now goes
# to its socket in one write, its prefix on the stack, and its name and payload inline. The
# tree's kfbench against the build before ($OLD), back-to-back pairs, one case per job: 8 B and
# 4 KiB in the default mode and busy-polling, and 64 KiB to 1 MiB (the queue's path, unchanged).
# $1 pairs. Writes case,pair,build,bytes,p50_us to $2.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../../.."
source bench/ab_pairs.sh "${1:-10}" "${2:-}"
for i in $(seq 1 "$pairs"); do
  for build in old new; do
    tcp tcp2 "$i" $build -b 8 -e 4K -f 512 -n 5000 -w 500
    KUNGFU_BUSY_POLL=1 tcp tcpbusy2 "$i" $build -b 8 -e 4K -f 512 -n 10000 -w 1000
    tcp tcpmid2 "$i" $build -b 64K -e 1M -f 4 -n 500 -w 50
  done
done
