#!/usr/bin/env bash
# netns-bidir-2026-11-29's bidir.py, one thread polling both directions, 16 MiB both ways between
# 2 namespaces, writing at most 512 KiB per call and reading until EAGAIN (as the transport
# does): two connections against one, and one writing all the socket takes, three runs each
# (that folder's loop.sh). Root, from the repository root. Prints
# run,tag,mode,phases,bytes,p50_ms,min_ms,max_ms (bidir_rerun.csv).
set -euo pipefail
exec "$(dirname "$0")/../netns-bidir-2026-11-29/loop.sh" two,loop,524288,1 one,loop,524288,1 \
  one,loop,1099511627776,1
