// The ns-3 network of a PhysicalTopology: the helper half of Ns3World (C++17: ns-3 glue only).
//
// As ns-3 separates helpers (which build nodes, devices and stacks) from models (which run on
// them), build_ns3_network builds the network once, before the simulation starts: a node per
// topology node with the internet stack, a point-to-point link per topology link with its queues
// (drop-tail device queues, a host's qdisc, a shaped link's token bucket), an address per link
// end, and routes (ns-3's global routing, plus leaf-spine host routes spread over the spines).
// Ns3World then carries the runtime's messages over it.
//
// Determinism: ns-3 numbers nodes, devices, addresses and random streams in the order it creates
// them, so a build is the same sequence of ns-3 calls for the same topology and qdisc every time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

#include "ns3/internet-module.h"
#include "ns3/network-module.h"

#include "sim/sim_world.h"
#include "topology/physical.h"

namespace kf {

inline ns3::Time to_ns3(std::chrono::nanoseconds d) {
  return ns3::NanoSeconds(d.count());
}

// What the model needs of the built network.
struct Ns3Network {
  ns3::NodeContainer nodes;                           // node i is PhysicalTopology node i
  std::vector<ns3::NetDeviceContainer> link_devices;  // per link: device 0 at its a, 1 at its b
  std::vector<ns3::Ipv4Address> node_address;         // each node's first interface's address
  std::map<std::uint32_t, int> rank_of_address;       // worker address (Ipv4Address::Get) -> rank
};

// Builds `topology` into ns-3 (see above). The TCP defaults must be set before: the internet
// stack installed here reads them. Every packet that a device queue, a queue disc or a traffic
// control layer drops adds one to *dropped_packets, which must outlive the simulation. Throws
// std::logic_error when an ns-3 object lacks a drop trace source.
Ns3Network build_ns3_network(const PhysicalTopology& topology, HostQdisc host_qdisc,
                             std::uint64_t* dropped_packets);

}  // namespace kf
