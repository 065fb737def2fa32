// Physical topologies: the machines and links a cluster runs on, as a plain graph that every
// simulated world (packet-level ns-3, flow-level) builds its network from. Worker r sits on node
// worker_node[r]; a host with several workers is a host node (its NIC) with each worker attached
// by a fast intra-host link.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kf {

struct LinkSpec {
  double bandwidth_bps = 1e9;
  std::chrono::nanoseconds latency = std::chrono::microseconds(5);
  std::uint32_t mtu = 1500;            // bytes per packet on this link
  std::uint32_t queue_packets = 1000;  // drop-tail queue at each end
  // A shaped link, as tc's tbf makes one of a faster device (a veth, a 10G NIC held to 1G): a
  // token bucket filling at bandwidth_bps and burst_bytes deep, over a wire at line_rate_bps.
  // After an idle spell a full bucket leaves at the line rate. 0: a plain wire at bandwidth_bps.
  std::uint64_t burst_bytes = 0;
  double line_rate_bps = 0;

  bool shaped() const { return burst_bytes > 0; }
};

enum class NodeKind : std::uint8_t { worker, host, switch_ };

struct PhysicalNode {
  NodeKind kind;
  std::string name;  // "w0", "host1", "switch", "leaf0", "spine1"
};

struct PhysicalLink {
  int a;
  int b;
  LinkSpec spec;
  std::string name;  // "w0-switch": how scenario events name links
};

struct PhysicalTopology {
  std::vector<PhysicalNode> nodes;
  std::vector<PhysicalLink> links;
  std::vector<int> worker_node;  // rank -> node
  std::vector<int> worker_host;  // rank -> host index (for host-aware strategies)

  int add_node(NodeKind kind, std::string name);
  int add_link(int a, int b, const LinkSpec& spec);
  int find_node(const std::string& name) const;  // -1 if none
  int find_link(const std::string& name) const;  // "a-b" or "b-a"; -1 if none
};

// `hosts` hosts on one switch, `workers_per_host` workers each. With one worker per host the
// worker is the host (its link goes straight to the switch); with more, workers hang off a host
// node by `intra_host` links and the host's `link` goes to the switch.
PhysicalTopology star_topology(int hosts, int workers_per_host, const LinkSpec& link,
                               const LinkSpec& intra_host);

// Two-tier Clos: `leaves` leaf switches each with `hosts_per_leaf` hosts, every leaf linked to
// every one of `spines` spine switches by `uplink`. Oversubscription = hosts_per_leaf x host
// bandwidth / (spines x uplink bandwidth).
PhysicalTopology leaf_spine_topology(int leaves, int spines, int hosts_per_leaf,
                                     int workers_per_host, const LinkSpec& host_link,
                                     const LinkSpec& uplink, const LinkSpec& intra_host);

}  // namespace kf
