// What a starting worker says while it waits for its peers to connect, and when it gives up:
// the peers still missing, grouped by host, so a multi-host job that hangs at start-up names the
// host that was started late, with other flags, or not at all. Pure functions (tested alone);
// kf::Peer prints them (launch/peer.cc), and kfrun relays them with the worker's prefix.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/cluster_spec.h"

namespace kf {

// "2 of 7 peers not connected yet, from 2 hosts: 10.0.0.3 (rank 4 :10000, rank 5 :10001),
// 10.0.0.4 (rank 6 :10000)". `missing` holds ranks of `cluster`, in any order; hosts appear in
// the order of their first missing rank.
std::string describe_unconnected(const ClusterSpec& cluster, int self_rank,
                                 const std::vector<int>& missing);

// The periodic line: "rank 0 (10.0.0.1:10000) waiting 5 s: <describe_unconnected>".
std::string waiting_line(const ClusterSpec& cluster, int self_rank, const std::vector<int>& missing,
                         std::chrono::milliseconds waited);

// The last line when the connect timeout passed with peers missing: "rank 0 (10.0.0.1:10000)
// gave up after 30 s: <describe_unconnected> (are their hosts' runners started, with the same
// -H, -np and -port-range?)".
std::string gave_up_line(const ClusterSpec& cluster, int self_rank, const std::vector<int>& missing,
                         std::chrono::milliseconds waited);

}  // namespace kf
