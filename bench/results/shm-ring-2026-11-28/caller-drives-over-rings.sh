#!/bin/bash
# The caller driving its loop (caller-drives-over-rings.patch: bench/results/caller-drives-2026-11-27's
# patch merged over the rings, the driver running the loop's pollers and arming them before it
# sleeps) against main, both with the rings, each worker pinned to one core, default mode and
# busy-polling, alternated within each run. MAIN and CD are the build directories of main and of
# a checkout with the patch applied (their apps/ hold kfrun and kfbench). Writes
# run,build,mode,ranks,bytes,p50_us to $1; $2 runs (default 4).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
out=$1; runs=${2:-4}
echo "run,build,mode,ranks,bytes,p50_us" > "$out"
for run in $(seq 1 "$runs"); do
  for np in 2 4; do
    for cfg in main:default cd:default main:busy cd:busy; do
      b=${cfg%%:*}; mode=${cfg##*:}
      dir="$MAIN/apps"; drives=0
      if [ "$b" = cd ]; then dir="$CD/apps"; drives=1; fi
      busy=0; [ "$mode" = busy ] && busy=1
      KUNGFU_CALLER_DRIVES=$drives KUNGFU_BUSY_POLL=$busy "$dir/kfrun" -np $np "$here/pin.sh" \
        "$dir/kfbench" allreduce -b 8 -e 256K -f 8 -n 2000 -w 100 2>&1 \
        | grep -E '^\S*\s+[0-9]+ ' \
        | awk -v r=$run -v b=$b -v m=$mode -v np=$np '{printf "%s,%s,%s,%s,%s,%s\n", r, b, m, np, $2, $11}' >> "$out"
    done
  done
done
