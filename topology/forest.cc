#include "topology/forest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/prim_minimum_spanning_tree.hpp>
#include <boost/graph/reverse_graph.hpp>

namespace kf {
namespace {

std::string range_text(std::size_t n) {
  return "0.." + std::to_string(static_cast<long>(n) - 1);
}

std::string join(const std::vector<int>& nodes, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) out += sep;
    out += std::to_string(nodes[i]);
  }
  return out;
}

std::vector<int> roots_of(std::span<const int> parent) {
  std::vector<int> roots;
  for (std::size_t i = 0; i < parent.size(); ++i) {
    if (parent[i] == static_cast<int>(i)) roots.push_back(static_cast<int>(i));
  }
  return roots;
}

// The first cycle met when following parents from each node in turn, rotated to start at its
// smallest node so the message is the same whichever node the walk began from. Empty if none.
// Parents must already be in range.
std::vector<int> find_cycle(std::span<const int> parent) {
  enum class Mark : std::uint8_t { unseen, on_path, done };
  std::vector<Mark> mark(parent.size(), Mark::unseen);
  for (std::size_t start = 0; start < parent.size(); ++start) {
    std::vector<int> path;
    int v = static_cast<int>(start);
    while (mark[static_cast<std::size_t>(v)] == Mark::unseen) {
      mark[static_cast<std::size_t>(v)] = Mark::on_path;
      path.push_back(v);
      const int p = parent[static_cast<std::size_t>(v)];
      if (p == v) break;  // a root ends the walk; it is not a cycle
      v = p;
    }
    if (mark[static_cast<std::size_t>(v)] == Mark::on_path &&
        parent[static_cast<std::size_t>(v)] != v) {
      auto cycle_begin = std::find(path.begin(), path.end(), v);
      std::vector<int> cycle(cycle_begin, path.end());
      std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
      return cycle;
    }
    for (int u : path)
      mark[static_cast<std::size_t>(u)] = Mark::done;
  }
  return {};
}

std::string cycle_text(std::vector<int> cycle) {
  cycle.push_back(cycle.front());
  return "nodes " + join(cycle, " -> ") + " form a cycle";
}

// Marks every node reachable from `sources` in `g` (any Boost.Graph incidence graph).
template <typename G>
std::vector<bool> reachable_from(const G& g, const std::vector<int>& sources) {
  const auto n = boost::num_vertices(g);
  std::vector<boost::default_color_type> color(n, boost::white_color);
  auto color_map =
      boost::make_iterator_property_map(color.begin(), boost::get(boost::vertex_index, g));
  boost::queue<typename boost::graph_traits<G>::vertex_descriptor> queue;
  for (int s : sources) {
    if (color[static_cast<std::size_t>(s)] != boost::white_color) continue;
    boost::breadth_first_visit(g, static_cast<std::size_t>(s), queue, boost::default_bfs_visitor(),
                               color_map);
  }
  std::vector<bool> seen(n);
  for (std::size_t v = 0; v < n; ++v)
    seen[v] = color[v] != boost::white_color;
  return seen;
}

int first_unreached(const std::vector<bool>& seen) {
  auto it = std::find(seen.begin(), seen.end(), false);
  return it == seen.end() ? -1 : static_cast<int>(it - seen.begin());
}

std::string root_count_text(const char* graph, const std::vector<int>& roots) {
  return std::string("graph pair: ") + graph + " graph has " + std::to_string(roots.size()) +
         " roots (" + join(roots, ", ") + "); a spanning tree needs exactly one";
}

// Returns the roots of a broadcast tree/forest: nodes with no prev.
std::vector<int> check_broadcast(const Graph& b, bool spanning) {
  std::vector<int> roots;
  for (int v = 0; v < b.size(); ++v) {
    if (b.has_self_loop(v)) {
      throw GraphError("graph pair: broadcast graph has a self-loop on node " + std::to_string(v));
    }
    const auto prevs = b.prevs(v);
    if (prevs.size() > 1) {
      throw GraphError("graph pair: node " + std::to_string(v) + " has " +
                       std::to_string(prevs.size()) + " prevs (" + join(prevs, ", ") +
                       ") in the broadcast graph; a tree allows one");
    }
    if (prevs.empty()) roots.push_back(v);
  }
  if (roots.empty()) throw GraphError("graph pair: broadcast graph has no root (a cycle)");
  if (spanning && roots.size() != 1) throw GraphError(root_count_text("broadcast", roots));
  // With at most one prev per node, "everything reachable from a root" rules out cycles too.
  const int lost = first_unreached(reachable_from(b.boost_graph(), roots));
  if (lost >= 0) {
    throw GraphError("graph pair: node " + std::to_string(lost) +
                     " is unreachable from the root in the broadcast graph");
  }
  return roots;
}

// Returns the roots of a reduce tree/forest: nodes with no next.
std::vector<int> check_reduce(const Graph& r, bool spanning) {
  std::vector<int> roots;
  for (int v = 0; v < r.size(); ++v) {
    if (!r.has_self_loop(v)) {
      throw GraphError("graph pair: node " + std::to_string(v) +
                       " has no self-loop in the reduce graph");
    }
    const auto nexts = r.nexts(v);
    if (nexts.size() > 1) {
      throw GraphError("graph pair: node " + std::to_string(v) + " has " +
                       std::to_string(nexts.size()) + " nexts (" + join(nexts, ", ") +
                       ") in the reduce graph; a tree allows one");
    }
    if (nexts.empty()) roots.push_back(v);
  }
  if (roots.empty()) throw GraphError("graph pair: reduce graph has no root (a cycle)");
  if (spanning && roots.size() != 1) throw GraphError(root_count_text("reduce", roots));
  // Walking edges backwards from the roots finds every node that reaches a root.
  const int lost =
      first_unreached(reachable_from(boost::make_reverse_graph(r.boost_graph()), roots));
  if (lost >= 0) {
    throw GraphError("graph pair: node " + std::to_string(lost) +
                     " does not reach the root in the reduce graph");
  }
  return roots;
}

void check_square(const std::vector<std::vector<double>>& latency) {
  const auto n = latency.size();
  if (n == 0) throw GraphError("minimum_spanning_tree: empty latency matrix");
  for (std::size_t i = 0; i < n; ++i) {
    if (latency[i].size() != n) {
      throw GraphError("minimum_spanning_tree: row " + std::to_string(i) + " has " +
                       std::to_string(latency[i].size()) + " entries, expected " +
                       std::to_string(n) + " (matrix must be square)");
    }
    for (std::size_t j = 0; j < n; ++j) {
      const double l = latency[i][j];
      if (!std::isfinite(l) || l < 0) {
        throw GraphError("minimum_spanning_tree: latency[" + std::to_string(i) + "][" +
                         std::to_string(j) + "] = " + std::to_string(l) +
                         " is not a finite non-negative number");
      }
    }
  }
}

}  // namespace

void validate_forest(std::span<const int> parent) {
  const auto n = parent.size();
  if (n == 0) throw GraphError("forest: empty (no nodes)");
  for (std::size_t i = 0; i < n; ++i) {
    const int p = parent[i];
    if (p < 0 || static_cast<std::size_t>(p) >= n) {
      throw GraphError("forest: parent of node " + std::to_string(i) + " is " + std::to_string(p) +
                       ", outside " + range_text(n));
    }
  }
  const auto cycle = find_cycle(parent);
  // Without a root every walk up the parents loops, so name the loop to point at the culprit.
  if (roots_of(parent).empty()) {
    throw GraphError("forest: no root (a root is its own parent); " + cycle_text(cycle));
  }
  if (!cycle.empty()) throw GraphError("forest: " + cycle_text(cycle));
}

GraphPair graph_pair_from_forest(std::span<const int> parent) {
  validate_forest(parent);
  Graph b(static_cast<int>(parent.size()));
  for (std::size_t i = 0; i < parent.size(); ++i) {
    if (parent[i] != static_cast<int>(i)) b.add_edge(parent[i], static_cast<int>(i));
  }
  return pair_from_broadcast(std::move(b));
}

Strategy strategy_from_forest(std::span<const int> parent) {
  validate_forest(parent);
  const auto roots = roots_of(parent);
  if (roots.size() != 1) {
    throw GraphError("forest has " + std::to_string(roots.size()) + " roots (" + join(roots, ", ") +
                     "); a strategy needs exactly one");
  }
  Strategy s;
  s.name = "FOREST";
  s.pairs.push_back(graph_pair_from_forest(parent));
  validate_graph_pair(s.pairs.front());
  return s;
}

void validate_graph_pair(const GraphPair& pair, bool spanning) {
  const int n = pair.broadcast.size();
  if (n == 0) throw GraphError("graph pair: empty (no nodes)");
  if (pair.reduce.size() != n) {
    throw GraphError("graph pair: reduce graph has " + std::to_string(pair.reduce.size()) +
                     " nodes, broadcast graph " + std::to_string(n));
  }
  const auto b_roots = check_broadcast(pair.broadcast, spanning);
  const auto r_roots = check_reduce(pair.reduce, spanning);
  if (b_roots != r_roots) {
    throw GraphError("graph pair: broadcast root(s) " + join(b_roots, ", ") +
                     " differ from reduce root(s) " + join(r_roots, ", "));
  }
}

GraphPair rerooted(const GraphPair& pair, int new_root) {
  const int n = pair.broadcast.size();
  if (new_root < 0 || new_root >= n) {
    throw GraphError("rerooted: new root " + std::to_string(new_root) + " is outside " +
                     range_text(static_cast<std::size_t>(n)));
  }
  const int old_root = pair.root();
  std::vector<int> label(static_cast<std::size_t>(n));
  for (int v = 0; v < n; ++v)
    label[static_cast<std::size_t>(v)] = v;
  std::swap(label[static_cast<std::size_t>(old_root)], label[static_cast<std::size_t>(new_root)]);
  return GraphPair{pair.reduce.relabeled(label), pair.broadcast.relabeled(label)};
}

std::vector<int> minimum_spanning_tree(const std::vector<std::vector<double>>& latency) {
  check_square(latency);
  using Undirected =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, boost::no_property,
                            boost::property<boost::edge_weight_t, double>>;
  const auto n = latency.size();
  Undirected g(n);
  // Measured latencies are rarely symmetric; the faster direction is what a link can offer.
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n; ++j) {
      boost::add_edge(i, j, std::min(latency[i][j], latency[j][i]), g);
    }
  }
  std::vector<std::size_t> pred(n);
  boost::prim_minimum_spanning_tree(g, pred.data());  // rooted at vertex 0
  std::vector<int> parent(n);
  for (std::size_t v = 0; v < n; ++v)
    parent[v] = static_cast<int>(pred[v]);
  return parent;
}

}  // namespace kf
