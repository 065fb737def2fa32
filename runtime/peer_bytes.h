// PeerBytes: bytes exchanged with each peer, for monitoring. Collectives talk to few peers in a
// row (a ring: one each way), so the current peer's running sum is kept inline and folded into
// the per-peer totals only when the peer changes or the totals are read: touching the totals on
// every message missed the cache every time with 1,024 simulated workers in one process. The
// totals hold only the peers that bytes went to (PeerValues), not one slot per worker.
#pragma once

#include <cstdint>

#include "runtime/peer_values.h"

namespace kf {

class PeerBytes {
 public:
  void add(int peer, std::uint64_t bytes) {
    if (peer != current_) {
      fold();
      current_ = peer;
    }
    pending_ += bytes;
  }
  const PeerValues<std::uint64_t>& totals() const {
    fold();
    return totals_;
  }

 private:
  void fold() const {
    if (current_ >= 0 && pending_ > 0) totals_[current_] += pending_;
    pending_ = 0;
  }

  // Reading folds the running sum in: a cache, not state, hence mutable. The running sum first:
  // add() reads only it and current_.
  mutable std::uint64_t pending_ = 0;
  int current_ = -1;
  mutable PeerValues<std::uint64_t> totals_;
};

}  // namespace kf
