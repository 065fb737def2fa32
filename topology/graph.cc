#include "topology/graph.h"

#include <algorithm>
#include <sstream>

namespace kf {
namespace {

std::string range_text(int n) {
  return "0.." + std::to_string(n - 1);
}

}  // namespace

Graph::Graph(int n) : g_(n < 0 ? 0 : static_cast<std::size_t>(n)) {
  if (n < 0) throw GraphError("graph: negative size " + std::to_string(n));
}

int Graph::size() const {
  return static_cast<int>(boost::num_vertices(g_));
}

void Graph::add_edge(int from, int to) {
  const int n = size();
  for (int v : {from, to}) {
    if (v < 0 || v >= n) {
      throw GraphError("graph: edge " + std::to_string(from) + "->" + std::to_string(to) +
                       " names node " + std::to_string(v) + ", outside " + range_text(n));
    }
  }
  // Strategies are built by unioning overlapping stars and trees; a set-like graph keeps
  // prevs/nexts free of repeats without every builder having to care.
  if (boost::edge(from, to, g_).second) return;
  boost::add_edge(from, to, g_);
}

bool Graph::has_self_loop(int v) const {
  if (v < 0 || v >= size()) return false;
  return boost::edge(v, v, g_).second;
}

std::vector<int> Graph::prevs(int v) const {
  std::vector<int> out;
  if (v < 0 || v >= size()) return out;
  for (auto [it, end] = boost::in_edges(v, g_); it != end; ++it) {
    const int u = static_cast<int>(boost::source(*it, g_));
    if (u != v) out.push_back(u);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> Graph::nexts(int v) const {
  std::vector<int> out;
  if (v < 0 || v >= size()) return out;
  for (auto [it, end] = boost::out_edges(v, g_); it != end; ++it) {
    const int u = static_cast<int>(boost::target(*it, g_));
    if (u != v) out.push_back(u);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<int, int>> Graph::edges() const {
  std::vector<std::pair<int, int>> out;
  out.reserve(boost::num_edges(g_));
  for (auto [it, end] = boost::edges(g_); it != end; ++it) {
    out.emplace_back(static_cast<int>(boost::source(*it, g_)),
                     static_cast<int>(boost::target(*it, g_)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Graph Graph::reversed() const {
  Graph r(size());
  for (const auto& [from, to] : edges())
    r.add_edge(to, from);
  return r;
}

Graph Graph::relabeled(std::span<const int> new_label) const {
  const int n = size();
  if (static_cast<int>(new_label.size()) != n) {
    throw GraphError("graph: relabeling has " + std::to_string(new_label.size()) + " labels for " +
                     std::to_string(n) + " nodes");
  }
  std::vector<bool> used(static_cast<std::size_t>(n), false);
  for (int v = 0; v < n; ++v) {
    const int l = new_label[static_cast<std::size_t>(v)];
    if (l < 0 || l >= n) {
      throw GraphError("graph: new label of node " + std::to_string(v) + " is " +
                       std::to_string(l) + ", outside " + range_text(n));
    }
    if (used[static_cast<std::size_t>(l)]) {
      throw GraphError("graph: label " + std::to_string(l) + " given twice (again to node " +
                       std::to_string(v) + "); relabeling must be a permutation");
    }
    used[static_cast<std::size_t>(l)] = true;
  }
  Graph r(n);
  for (const auto& [from, to] : edges()) {
    r.add_edge(new_label[static_cast<std::size_t>(from)], new_label[static_cast<std::size_t>(to)]);
  }
  return r;
}

std::string Graph::to_string() const {
  std::ostringstream os;
  bool first = true;
  for (const auto& [from, to] : edges()) {
    if (!first) os << ' ';
    first = false;
    os << from << "->" << to;
  }
  return os.str();
}

}  // namespace kf
