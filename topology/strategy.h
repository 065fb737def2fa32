// Collective strategies. Every strategy is a list of (reduce graph, broadcast graph) pairs: each
// chunk of a collective picks one pair by a hash of its name, so multi-pair strategies spread
// load. RING_RS_AG and HALVING_DOUBLING are bandwidth-optimal algorithms that are not a single
// graph pair; they still carry graph pairs, which rooted operations (reduce, broadcast) use.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "topology/graph.h"

namespace kf {

struct GraphPair {
  Graph reduce;     // reversed broadcast tree + a self-loop on every node
  Graph broadcast;  // a spanning tree (or, for subset collectives, a forest)
  // The root of the broadcast graph: the only node with no prev (for a spanning pair).
  int root() const;
};

enum class StrategyName : std::uint8_t {
  star,
  multi_star,
  tree,
  binary_tree,
  binary_tree_star,
  multi_binary_tree_star,
  clique,
  ring,
  // "AUTO" (Algorithm::by_size): STAR's graphs on one host, BINARY_TREE_STAR's across hosts; a
  // small allreduce goes by recursive doubling instead, a large one round a ring or, among 4, 8,
  // 16... ranks on as many hosts, by halving-doubling up to a size
  // (EngineOptions::auto_doubling_bytes, auto_ring_part_bytes, auto_local_ring_part_bytes,
  // auto_halving_doubling_bytes).
  automatic,
  ring_rs_ag,
  halving_doubling,
  // RING_RS_AG with every other slice going round the ring backwards: each pair of neighbours
  // then carries data both ways, which over TCP with one connection per pair (duplex) sends fewer
  // packets, the acknowledgements riding on the data. AUTO's ring across hosts is this one.
  ring_rs_ag_bidir,
};

inline constexpr StrategyName kAllStrategyNames[] = {StrategyName::star,
                                                     StrategyName::multi_star,
                                                     StrategyName::tree,
                                                     StrategyName::binary_tree,
                                                     StrategyName::binary_tree_star,
                                                     StrategyName::multi_binary_tree_star,
                                                     StrategyName::clique,
                                                     StrategyName::ring,
                                                     StrategyName::automatic,
                                                     StrategyName::ring_rs_ag,
                                                     StrategyName::halving_doubling,
                                                     StrategyName::ring_rs_ag_bidir};

std::string_view strategy_name(StrategyName s);  // "STAR", ..., "AUTO", "RING_RS_AG"
std::optional<StrategyName> parse_strategy_name(std::string_view name);  // case-insensitive
std::ostream& operator<<(std::ostream& os, StrategyName s);

enum class Algorithm : std::uint8_t {
  graph_pairs,
  ring_rs_ag,
  halving_doubling,
  ring_rs_ag_bidir,  // RING_RS_AG, its odd slices going round backwards
  // An allreduce picks by its size, as NCCL and MPI tune: the smallest by recursive doubling
  // (log2 n steps, latency-bound), medium ones over the graph pairs, large ones across hosts
  // round RING_RS_AG (every link busy, each carrying 2(n-1)/n of the buffer, bandwidth-bound).
  // Every peer decides alike from the size (runtime/collectives.cc). Other collectives use the
  // graphs.
  by_size,
};

struct Strategy {
  std::string name;  // "STAR", "BINARY_TREE_STAR", "FOREST", "MST", ...
  Algorithm algorithm = Algorithm::graph_pairs;
  std::vector<GraphPair> pairs;  // never empty
  // Stable across processes and builds: name, algorithm and every edge. Peers compare digests
  // before switching strategy.
  std::uint64_t digest() const;
};

// The pair KungFu derives from a broadcast tree (or forest): the reduce graph is the broadcast
// graph reversed, with a self-loop on every node. Not validated.
GraphPair pair_from_broadcast(Graph broadcast);

// host_of[r] = the host index rank r runs on. Hosts are numbered by first appearance; the first
// rank on a host is its master. Every returned pair is validated.
Strategy make_strategy(StrategyName name, std::span<const int> host_of);

// make_strategy(), built once per (name, host_of) while anyone holds the result: a process that
// runs many engines of one cluster (a simulation of a thousand workers) shares one copy of the
// graphs instead of building and keeping a thousand. Thread-safe.
std::shared_ptr<const Strategy> shared_strategy(StrategyName name, std::span<const int> host_of);
// `strategy` with its algorithm set to `algorithm` (its name and graphs kept), shared the same way
// while anyone holds it and `strategy` lives. Thread-safe.
std::shared_ptr<const Strategy> shared_with_algorithm(
    const std::shared_ptr<const Strategy>& strategy, Algorithm algorithm);

// The first rank of each host, in order of first appearance.
std::vector<int> host_masters(std::span<const int> host_of);

}  // namespace kf
