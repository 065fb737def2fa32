# shellcheck shell=bash source-path=SCRIPTDIR
# A cluster of N hosts reachable over SSH, for the tests of kfrun -ssh (source it). Each host is a
# network namespace on a bridge (tests/netns_lib.sh, links not shaped) running a real sshd of its
# own on a leased port, with a throw-away host key; a throw-away client key is authorised for
# root, and an ssh client config file makes `ssh -F "$SSH_CONFIG" IP` work from any host with no
# prompt. Nothing outside the namespaces and WORK is touched, except that /run/sshd (sshd's
# privilege-separation directory) is created when missing.
#
#   N=4 TAG=kfs$$ SUBNET=10.78.0 WORK=$(mktemp -d)
#   source tests/ssh_cluster.sh
#   trap ssh_cluster_stop EXIT INT TERM
#   ssh_cluster_start          # or exits 77 with the reason (not root, no sshd, no namespaces)
#   on_host 0 ssh -F "$SSH_CONFIG" "$(host_ip 2)" true
#   ssh_host_down 3            # stop host 3's sshd (the host itself stays)
#
# After ssh_cluster_start: SSH_PORT (the sshd port on every host), SSH_KEY (the client's private
# key), SSH_CONFIG (the client config: port, key, user root, known hosts, BatchMode).
# ssh_cluster_stop kills every process in the namespaces and removes them and WORK.

_ssh_cluster_dir="$(dirname "${BASH_SOURCE[0]}")"
source "$_ssh_cluster_dir/netns_lib.sh"
source "$_ssh_cluster_dir/port_lease.sh"

host_ip() { echo "$SUBNET.$(($1 + 1))"; }
host_ns() { echo "${TAG}n$1"; }
# on_host I CMD...: runs CMD inside host I's namespace.
on_host() {
  local i=$1
  shift
  ip netns exec "$(host_ns "$i")" "$@"
}

ssh_cluster_stop() { netns_cleanup; }

ssh_cluster_start() {
  : "${MTU:=1500}"
  local sshd=/usr/sbin/sshd
  [[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces and run sshd"
  [[ -x $sshd ]] || skip "no $sshd (Debian: apt-get install openssh-server)"
  command -v ssh >/dev/null || skip "no ssh client (Debian: openssh-client)"
  command -v ssh-keygen >/dev/null || skip "no ssh-keygen (Debian: openssh-client)"
  netns_setup ""
  lease_ports 1
  SSH_PORT=$PORT_BASE
  local dir="$WORK/ssh"
  mkdir -p "$dir" /run/sshd
  chmod 700 "$dir"
  ssh-keygen -q -t ed25519 -N '' -C kf-test-host -f "$dir/host_key" || skip "ssh-keygen failed"
  ssh-keygen -q -t ed25519 -N '' -C kf-test-client -f "$dir/id" || skip "ssh-keygen failed"
  SSH_KEY="$dir/id"
  cp "$dir/id.pub" "$dir/authorized_keys"
  : >"$dir/known_hosts"
  local i
  for i in $(seq 0 $((N - 1))); do
    echo "[$(host_ip "$i")]:$SSH_PORT $(cut -d' ' -f1,2 "$dir/host_key.pub")" >>"$dir/known_hosts"
  done
  cat >"$dir/sshd_config" <<EOF
Port $SSH_PORT
HostKey $dir/host_key
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PrintMotd no
Subsystem sftp internal-sftp
EOF
  SSH_CONFIG="$dir/config"
  cat >"$SSH_CONFIG" <<EOF
Host *
  Port $SSH_PORT
  User root
  IdentityFile $SSH_KEY
  IdentitiesOnly yes
  UserKnownHostsFile $dir/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5
  LogLevel ERROR
EOF
  "$sshd" -t -f "$dir/sshd_config" 2>"$dir/sshd_check" ||
    skip "sshd rejects the test configuration: $(cat "$dir/sshd_check")"
  for i in $(seq 0 $((N - 1))); do
    # Not through on_host: $! must be sshd itself (ip netns exec execs it), not a subshell.
    ip netns exec "$(host_ns "$i")" "$sshd" -D -f "$dir/sshd_config" \
      -o "PidFile=$dir/sshd$i.pid" -E "$dir/sshd$i.log" &
    echo $! >"$dir/sshd$i.pid.launcher"
  done
  # Up when every sshd answers a login from the first host (within 15 s).
  for i in $(seq 0 $((N - 1))); do
    local t
    for t in $(seq 150); do
      on_host 0 ssh -F "$SSH_CONFIG" "$(host_ip "$i")" true 2>/dev/null && break
      ((t < 150)) || skip "sshd on host $i ($(host_ip "$i")) did not accept a login in 15 s: $(tail -3 "$dir/sshd$i.log")"
      sleep 0.1
    done
  done
}

# ssh_host_down I: stops host I's sshd (its listener; sessions already open are left alone).
ssh_host_down() {
  local pid
  pid="$(cat "$WORK/ssh/sshd$1.pid.launcher")"
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return 0
}

# host_processes I: the processes in host I's namespace other than its sshd listener, one
# "pid command" a line.
host_processes() {
  local listener pid
  listener="$(cat "$WORK/ssh/sshd$1.pid.launcher" 2>/dev/null)"
  for pid in $(ip netns pids "$(host_ns "$1")" 2>/dev/null); do
    [[ "$pid" == "$listener" ]] && continue
    { echo "$pid $(tr '\0' ' ' <"/proc/$pid/cmdline")"; } 2>/dev/null
  done
}
