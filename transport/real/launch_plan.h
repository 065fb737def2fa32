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

#include "runtime/cluster_spec.h"
#include "transport/real/worker_env.h"

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
// The first np slots over the hosts in order; one runner per host.
ClusterSpec plan_cluster(const std::vector<HostSlots>& hosts, int np, PortRange ports,
                         std::uint16_t runner_port = kDefaultRunnerPort);
// The IPv4 address of a network interface ("eth0"); throws if it has none.
std::string interface_ip(const std::string& nic);

struct WorkerLaunch {
  PeerID id;
  int rank = 0;
  EnvMap env;  // the KUNGFU_* variables to add
};
// The workers of `cluster` on host `self`, with their environment.
std::vector<WorkerLaunch> local_workers(const ClusterSpec& cluster, const std::string& self,
                                        const std::string& strategy,
                                        const std::string& config_server);

std::string join_peers(const std::vector<PeerID>& ids);  // "h:p,h:p"

}  // namespace kf
