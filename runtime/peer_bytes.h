// PeerBytes: bytes exchanged with each peer, for monitoring. Collectives talk to few peers in a
// row (a ring: one each way), so the current peer's running sum is kept inline and folded into
// the per-peer totals only when the peer changes or the totals are read. With 1,024 simulated
// workers in one process the totals are 8 KiB per engine, and touching them on every message
// missed the cache every time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kf {

class PeerBytes {
 public:
  explicit PeerBytes(std::size_t peers = 0) : totals_(peers, 0) {}

  // `peer` must be below the size given at construction.
  void add(int peer, std::uint64_t bytes) {
    if (peer != current_) {
      fold();
      current_ = peer;
    }
    pending_ += bytes;
  }
  const std::vector<std::uint64_t>& totals() const {
    fold();
    return totals_;
  }

 private:
  void fold() const {
    if (current_ >= 0) totals_[static_cast<std::size_t>(current_)] += pending_;
    pending_ = 0;
  }

  // Reading folds the running sum in: a cache, not state, hence mutable. The running sum first:
  // add() reads only it and current_.
  mutable std::uint64_t pending_ = 0;
  int current_ = -1;
  mutable std::vector<std::uint64_t> totals_;
};

}  // namespace kf
