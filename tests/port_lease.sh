# Ports for shell tests, leased so that no two tests running at once (C++, Python or shell) meet:
# the contract of tests/port_lease.h (blocks of 64 in 20000-32767, each an flock on
# /tmp/kf-test-ports/<first>.lock held by this shell until it exits). Source it, then
#   lease_ports N    # sets PORT_BASE: PORT_BASE .. PORT_BASE+N-1 are this test's
# Needs flock(1) (util-linux). Fails the test (exit 1) when every block is taken.

lease_ports() {
  local n=$1 dir=/tmp/kf-test-ports first=20000 block=64
  local blocks=$(((n + block - 1) / block))
  local starts=$(((32768 - first) / block - blocks + 1))
  mkdir -p "$dir" && chmod 1777 "$dir" 2>/dev/null
  local offset=$((RANDOM % starts)) i b fd base ok fds
  for ((i = 0; i < starts; i++)); do
    local s=$(((offset + i) % starts))
    fds=() ok=1
    for ((b = s; b < s + blocks; b++)); do
      exec {fd}>>"$dir/$((first + b * block)).lock"
      if flock -n "$fd"; then fds+=("$fd"); else exec {fd}>&-; ok=0; break; fi
    done
    base=$((first + s * block))
    if ((ok)) && _ports_bindable "$base" "$n"; then
      PORT_BASE=$base
      return 0
    fi
    for fd in "${fds[@]}"; do exec {fd}>&-; done
  done
  echo "lease_ports: every port block in 20000-32767 is taken" >&2
  exit 1
}

# True if nothing listens on 127.0.0.1 ports BASE .. BASE+N-1 (ss from iproute2).
_ports_bindable() {
  local base=$1 n=$2
  ! ss -Htln "sport >= :$base and sport <= :$((base + n - 1))" 2>/dev/null | grep -q .
}
