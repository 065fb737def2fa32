// What kfrun computes before starting anything, as pure functions (tested without processes):
// the host list (-H or -hostfile), the global worker list every runner derives identically
// (host by host, slot j on a host listening on port-range begin + j), this runner's own IP (-self
// or -nic), and the KUNGFU_* environment of each local worker.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launch/worker_env.h"
#include "runtime/cluster_spec.h"

namespace kf {

struct HostSlots {
  std::string ip;
  int slots = 1;
  bool operator==(const HostSlots&) const = default;
};

struct PortRange {
  std::uint16_t begin = 10000;
  std::uint16_t end = 11000;  // inclusive
};

// All throw std::invalid_argument naming the bad text.
std::vector<HostSlots> parse_host_list(std::string_view text);     // "ip:slots,ip:slots"
std::vector<HostSlots> parse_hostfile(std::string_view contents);  // lines "IP slots=N", # comments
PortRange parse_port_range(std::string_view text);                 // "10000-11000"
// The runners' port (they are named by it in a cluster; nothing listens on it) for workers on
// ports [first, last]: kDefaultRunnerPort, or when that is one of them the port after the range
// (before it when the range ends at 65535).
std::uint16_t runner_port_clear_of(std::uint16_t first, std::uint16_t last);
// The first np slots over the hosts in order; one runner per host, also on hosts with no worker.
// `runner_port` 0: runner_port_clear_of(ports); a given one inside `ports` is an error.
ClusterSpec plan_cluster(const std::vector<HostSlots>& hosts, int np, PortRange ports,
                         std::uint16_t runner_port = 0);
// The IPv4 address of a network interface ("eth0"); throws if it has none.
std::string interface_ip(const std::string& nic);

struct WorkerLaunch {
  PeerID id;
  int rank = 0;
  EnvMap env;  // the KUNGFU_* variables to add
  // What the supervisor (supervisor.h) needs for processes other than plain workers (kfrun -ssh
  // runs a runner per host through it). Empty command: SupervisorOptions::command.
  std::vector<std::string> command;
  // Set: written to the process's stdin, which then stays open; the supervisor stops it by
  // closing its stdin (a runner's signal to tear its host down), not by a signal. Unset: stdin is
  // inherited.
  std::optional<std::string> stdin_text;
  std::string name;  // in log lines; empty: "rank R (ip:port)"
  // Non-empty: the output is relayed (a runner's, whose worker lines carry their own prefix):
  // lines pass unprefixed, and its "[kfrun] " lines become "[kfrun@relay_host] ".
  std::string relay_host;
};
// The workers of `cluster` on host `self`, with their environment.
std::vector<WorkerLaunch> local_workers(const ClusterSpec& cluster, const std::string& self,
                                        const std::string& strategy,
                                        const std::string& config_server);

std::string join_peers(const std::vector<PeerID>& ids);             // "h:p,h:p"
std::string format_host_list(const std::vector<HostSlots>& hosts);  // "ip:slots,ip:slots"
std::string format_port_range(PortRange ports);                     // "10000-11000"

// Elastic mode (kfrun -w): what every worker is told besides local_workers()'s variables, so it
// can propose a resized cluster (ClusterSpec::resized(n, ports.begin, slots)).
struct ElasticEnv {
  std::string host_slots;  // KUNGFU_HOST_SLOTS, format_host_list(-H)
  std::string port_range;  // KUNGFU_PORT_RANGE, format_port_range(-port-range)
};
// local_workers() plus KUNGFU_ELASTIC=1, KUNGFU_HOST_SLOTS, KUNGFU_PORT_RANGE and, for workers
// started because a new cluster version added them, KUNGFU_JOINING=1.
std::vector<WorkerLaunch> elastic_local_workers(const ClusterSpec& cluster, const std::string& self,
                                                const std::string& strategy,
                                                const std::string& config_server,
                                                const ElasticEnv& elastic, bool joining);

}  // namespace kf
