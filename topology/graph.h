// A directed graph over ranks 0..n-1, the unit every collective strategy is made of.
// A broadcast graph is a tree: data flows from its root along the edges. A reduce graph is a tree
// pointing at the root with a self-loop on every node: "reduce what arrives into my own buffer,
// then pass the sum on". Boost.Graph holds the edges; the engine reads prevs/nexts once per
// strategy and caches them.
#pragma once

#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <boost/graph/adjacency_list.hpp>

namespace kf {

// Thrown for a malformed graph or forest; the message says which node and what is wrong.
class GraphError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class Graph {
 public:
  using BoostGraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;

  explicit Graph(int n = 0);

  int size() const;
  void add_edge(int from, int to);  // from == to adds a self-loop; duplicates are ignored
  bool has_self_loop(int v) const;
  std::vector<int> prevs(int v) const;             // in-neighbours, self excluded, ascending
  std::vector<int> nexts(int v) const;             // out-neighbours, self excluded, ascending
  std::vector<std::pair<int, int>> edges() const;  // sorted, self-loops included
  Graph reversed() const;                          // every edge flipped, self-loops kept
  Graph relabeled(std::span<const int> new_label) const;  // node v becomes new_label[v]
  std::string to_string() const;                          // "0->1 0->2 1->1", sorted

  const BoostGraph& boost_graph() const { return g_; }

  friend bool operator==(const Graph& a, const Graph& b) { return a.edges() == b.edges(); }

 private:
  BoostGraph g_;
};

}  // namespace kf
