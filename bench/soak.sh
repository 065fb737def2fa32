#!/usr/bin/env bash
# The soak (bench/soak.py): 4 workers run every collective, mixed and checked, for MINUTES
# (default 20); each worker's resident memory and open descriptors are sampled and must stay flat
# after the warm-up. Records go to --out (default out/soak); exit 1 when a check fails.
#   ./kf bench soak [MINUTES] [soak.py flags]      (./kf passes the build directory first)
#   bench/soak.sh BUILD_DIR [MINUTES] [--out DIR] [--interval S] [--rss-slope-max KIB_PER_MIN]
set -euo pipefail
BUILD="${1:-$(dirname "$0")/../build/release}"
shift || true
exec /usr/bin/python3 "$(dirname "$0")/soak.py" --build "$BUILD" "$@"
