// Routes: one rank's view of a graph pair (whom it receives from and sends to in each phase),
// read from topology/ once per strategy so the hot path never walks a graph.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "topology/strategy.h"

namespace kf {

struct Routes {
  std::vector<int> reduce_prevs;  // ascending: contributions are folded in this fixed order
  int reduce_next = -1;           // -1 at the root
  int broadcast_prev = -1;        // -1 at the root
  std::vector<int> broadcast_nexts;
  int group_size = 1;  // ranks in this rank's tree (all ranks for a spanning pair)
  bool is_root() const { return broadcast_prev < 0; }
};

Routes routes_of(const GraphPair& pair, int rank);

// A strategy together with this rank's routes for each of its pairs.
class CompiledStrategy {
 public:
  CompiledStrategy(std::shared_ptr<const Strategy> strategy, int rank);

  const Strategy& strategy() const { return *strategy_; }
  std::shared_ptr<const Strategy> shared_strategy() const { return strategy_; }
  Algorithm algorithm() const { return strategy_->algorithm; }
  // Which pair carries chunk `chunk` of collective `name`: a stable hash, so every peer agrees
  // and multi-pair strategies spread chunks over their pairs.
  std::size_t pair_index(std::string_view name, std::size_t chunk) const;
  const Routes& routes(std::size_t pair) const { return routes_[pair]; }
  std::size_t pair_count() const { return routes_.size(); }

 private:
  std::shared_ptr<const Strategy> strategy_;
  std::vector<Routes> routes_;
};

}  // namespace kf
