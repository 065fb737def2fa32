// Routes over a PhysicalTopology, as the ns-3 world routes packets: shortest paths, and between
// leaves of a leaf-spine network the spine picked by the destination worker (slot r goes through
// spine r mod spines), which is how Ns3World::spread_over_spines installs its host routes. A
// route is a list of channels: link i carries channel 2i from its end a to b and 2i + 1 back.
#pragma once

#include <vector>

#include "topology/physical.h"

namespace kf {

inline int channel_of(int link, bool from_a) {
  return 2 * link + (from_a ? 0 : 1);
}
inline int link_of(int channel) {
  return channel / 2;
}

class FlowRoutes {
 public:
  explicit FlowRoutes(const PhysicalTopology& topology);
  // Channels from node `from` to node `to` (empty when from == to). Throws if unreachable.
  std::vector<int> route(int from, int to) const;

 private:
  std::vector<int> shortest(int from, int to) const;

  const PhysicalTopology& topo_;
  std::vector<std::vector<int>> adjacent_;  // node -> links, in link order
  std::vector<int> spines_;                 // spine switch nodes, in node order
  std::vector<int> slot_of_node_;           // worker node -> slot, else -1
};

}  // namespace kf
