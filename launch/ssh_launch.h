// kfrun -ssh: one command on one host starts the job on every host. It plans the cluster as every
// runner will, runs the pre-flight (preflight.h) on every host at once and starts nothing unless
// all pass; then starts each host's runner (kfrun -ssh-child with the same flags, -H and this
// host's -self) over SSH, or directly on the launcher's own host, hands them the KUNGFU_*
// environment and the secret on stdin (ssh_remote.h), relays their output (worker lines keep
// their [ip.port::stream] prefix; a runner's own lines read [kfrun@ip]), and supervises them as
// kfrun supervises workers: the first runner to fail decides the exit code and every other host
// is torn down (its stdin closed, so its runner stops its workers; its ssh killed if it is still
// there after the grace), and so do Ctrl-C, SIGTERM and a dropped SSH connection (ssh exits 255).
// Elastic (-w): every host gets a runner; with -builtin-config-port the first host serves the
// config and the others are pointed at it with -config-server.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launch/launch_plan.h"
#include "launch/ssh_remote.h"

namespace kf {

struct SshLaunch {
  std::vector<HostSlots> hosts;
  ClusterSpec cluster;  // the plan every runner derives
  bool elastic = false;
  // kfrun flags every runner gets as they were given (-np, -port-range, -strategy, ...), as
  // "-name=value" words; not -H, -hostfile, -self, -nic, the -ssh flags, and with -w not
  // -builtin-config-port, -tls-cert, -tls-key (the first host's only).
  std::vector<std::string> runner_flags;
  std::vector<std::string> command;  // the workers'
  std::string nic;                   // -nic: checked on every host
  int builtin_config_port = 0;
  // -tls-cert / -tls-key: for the hosts that get -builtin-config-port (all; with -w the first)
  std::vector<std::string> server_flags;
  std::string config_scheme = "http";  // of the builtin server
  std::string kfrun;                   // the kfrun to run on the hosts (absolute path)
  std::optional<std::chrono::milliseconds> timeout;  // -timeout (the runners enforce it)
  bool quiet = false;
  std::chrono::milliseconds preflight_limit{30000};  // per host
  std::chrono::milliseconds grace{10000};  // a host's runner to stop after its stdin closes
};

// The job's exit code: 0; the first failing runner's (a worker's code, 124 on -timeout, 255 when
// ssh failed or its connection dropped); 128 + signal when the launcher was signalled; 2 when the
// pre-flight failed (each problem named on stderr, nothing started).
int launch_over_ssh(const SshLaunch& launch, const SshOptions& ssh);

// Whether `ip` is an address of one of this machine's interfaces (its runner then starts
// without SSH).
bool is_local_address(const std::string& ip);

}  // namespace kf
