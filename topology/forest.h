// Strategies from forests (parent[i] = the parent of i; a root is its own parent), validation of
// graph pairs, re-rooting, and the minimum spanning tree over measured latencies.
#pragma once

#include <span>
#include <vector>

#include "topology/strategy.h"

namespace kf {

// Throws GraphError when a parent is out of range, the parents form a cycle, or there is no root.
void validate_forest(std::span<const int> parent);

// A pair whose broadcast graph is the forest (parent -> child edges) and whose reduce graph is
// its reversal with a self-loop on every node. Any number of trees: each tree is one group.
GraphPair graph_pair_from_forest(std::span<const int> parent);

// A strategy from a forest that must be a single spanning tree (exactly one root).
Strategy strategy_from_forest(std::span<const int> parent);

// Throws GraphError unless: the broadcast graph is a tree spanning all nodes (one root, each other
// node has exactly one prev, all reachable from the root); the reduce graph has a self-loop on
// every node, each non-root node has exactly one next, the root has none, and every node reaches
// the root; both graphs have the same root. With spanning = false, each of the two graphs may be a
// forest and the check applies per tree (subset collectives).
void validate_graph_pair(const GraphPair& pair, bool spanning = true);

// The same pair with `new_root` in the place of the old root (their labels swapped).
GraphPair rerooted(const GraphPair& pair, int new_root);

// Prim's minimum spanning tree (Boost.Graph) over a symmetric latency matrix, as a parent vector
// rooted at 0. Throws GraphError for a non-square or empty matrix or a negative entry.
std::vector<int> minimum_spanning_tree(const std::vector<std::vector<double>>& latency);

}  // namespace kf
