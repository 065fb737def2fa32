#include "sim/flow/flow_routes.h"

#include <algorithm>
#include <stdexcept>

namespace kf {

FlowRoutes::FlowRoutes(const PhysicalTopology& topology)
    : topo_(topology), adjacent_(topology.nodes.size()), slot_of_node_(topology.nodes.size(), -1) {
  for (std::size_t i = 0; i < topo_.links.size(); ++i) {
    adjacent_[static_cast<std::size_t>(topo_.links[i].a)].push_back(static_cast<int>(i));
    adjacent_[static_cast<std::size_t>(topo_.links[i].b)].push_back(static_cast<int>(i));
  }
  for (std::size_t i = 0; i < topo_.nodes.size(); ++i) {
    if (topo_.nodes[i].kind == NodeKind::switch_ && topo_.nodes[i].name.rfind("spine", 0) == 0)
      spines_.push_back(static_cast<int>(i));
  }
  for (std::size_t r = 0; r < topo_.worker_node.size(); ++r)
    slot_of_node_[static_cast<std::size_t>(topo_.worker_node[r])] = static_cast<int>(r);
}

// Breadth-first, neighbours in link order: deterministic, and the first of equal-cost paths.
std::vector<int> FlowRoutes::shortest(int from, int to) const {
  if (from == to) return {};
  std::vector<int> via(topo_.nodes.size(), -1);  // the channel that first reached each node
  std::vector<int> frontier{from};
  via[static_cast<std::size_t>(from)] = -2;
  for (std::size_t i = 0; i < frontier.size() && via[static_cast<std::size_t>(to)] == -1; ++i) {
    const int node = frontier[i];
    for (int link : adjacent_[static_cast<std::size_t>(node)]) {
      const PhysicalLink& l = topo_.links[static_cast<std::size_t>(link)];
      const bool from_a = l.a == node;
      const int next = from_a ? l.b : l.a;
      if (via[static_cast<std::size_t>(next)] != -1) continue;
      via[static_cast<std::size_t>(next)] = channel_of(link, from_a);
      frontier.push_back(next);
    }
  }
  if (via[static_cast<std::size_t>(to)] == -1) {
    throw std::invalid_argument("no route from " +
                                topo_.nodes[static_cast<std::size_t>(from)].name + " to " +
                                topo_.nodes[static_cast<std::size_t>(to)].name);
  }
  std::vector<int> path;
  for (int node = to; node != from;) {
    const int ch = via[static_cast<std::size_t>(node)];
    path.push_back(ch);
    const PhysicalLink& l = topo_.links[static_cast<std::size_t>(link_of(ch))];
    node = ch % 2 == 0 ? l.a : l.b;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int> FlowRoutes::route(int from, int to) const {
  std::vector<int> path = shortest(from, to);
  const int slot = slot_of_node_[static_cast<std::size_t>(to)];
  if (spines_.size() < 2 || slot < 0) return path;
  // Crossing the spine layer: go through the destination's spine instead.
  const auto crosses = [&](int ch) {
    const PhysicalLink& l = topo_.links[static_cast<std::size_t>(link_of(ch))];
    const int end = ch % 2 == 0 ? l.b : l.a;
    return std::find(spines_.begin(), spines_.end(), end) != spines_.end();
  };
  if (std::none_of(path.begin(), path.end(), crosses)) return path;
  const int spine = spines_[static_cast<std::size_t>(slot) % spines_.size()];
  path = shortest(from, spine);
  const std::vector<int> down = shortest(spine, to);
  path.insert(path.end(), down.begin(), down.end());
  return path;
}

}  // namespace kf
