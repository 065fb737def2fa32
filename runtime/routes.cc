#include "runtime/routes.h"

#include <cstring>
#include <string>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kf {

Routes routes_of(const GraphPair& pair, int rank) {
  Routes r;
  r.reduce_prevs = pair.reduce.prevs(rank);
  const auto reduce_nexts = pair.reduce.nexts(rank);
  r.reduce_next = reduce_nexts.empty() ? -1 : reduce_nexts.front();
  const auto bcast_prevs = pair.broadcast.prevs(rank);
  r.broadcast_prev = bcast_prevs.empty() ? -1 : bcast_prevs.front();
  r.broadcast_nexts = pair.broadcast.nexts(rank);

  // The size of this rank's tree: climb to the root, then count everything below it.
  int root = rank;
  for (auto up = pair.broadcast.prevs(root); !up.empty(); up = pair.broadcast.prevs(root)) {
    root = up.front();
  }
  int count = 0;
  std::vector<int> stack{root};
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    ++count;
    for (int child : pair.broadcast.nexts(v))
      stack.push_back(child);
  }
  r.group_size = count;
  return r;
}

CompiledStrategy::CompiledStrategy(std::shared_ptr<const Strategy> strategy, int rank)
    : strategy_(std::move(strategy)) {
  routes_.reserve(strategy_->pairs.size());
  for (const auto& pair : strategy_->pairs)
    routes_.push_back(routes_of(pair, rank));
}

std::size_t CompiledStrategy::pair_index(std::string_view name, std::size_t chunk) const {
  if (routes_.size() == 1) return 0;
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  XXH3_64bits_update(&state, name.data(), name.size());
  const std::uint64_t c = chunk;
  XXH3_64bits_update(&state, &c, sizeof(c));
  return static_cast<std::size_t>(XXH3_64bits_digest(&state) % routes_.size());
}

}  // namespace kf
