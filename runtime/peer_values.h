// PeerValues: one number per peer (a byte count, a rate, a round-trip time), kept only for the
// peers that have one, in peer order. A worker talks to few peers (a ring: two; a star's root:
// all), so a dense vector per peer would cost n entries per worker per counter: O(n^2) memory in
// a simulation that holds every worker (4,096 workers, one step: 1.67 GB peak with dense vectors,
// 159 MB with these).
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <vector>

namespace kf {

template <typename T>
class PeerValues {
 public:
  struct Entry {
    int peer;
    T value;
    bool operator==(const Entry&) const = default;
  };

  PeerValues() = default;
  // Entries in any order; a peer named twice keeps its last value.
  PeerValues(std::initializer_list<Entry> entries) {
    for (const Entry& e : entries)
      set(e.peer, e.value);
  }

  // The value of `peer`, made (as T{}) if it has none yet.
  T& operator[](int peer) {
    const auto it = first_not_before(entries_, peer);
    if (it != entries_.end() && it->peer == peer) return it->value;
    return entries_.insert(it, Entry{peer, T{}})->value;
  }
  void set(int peer, T value) { (*this)[peer] = value; }
  // The value of `peer`, or `missing` if it has none.
  T get(int peer, T missing = T{}) const {
    const auto it = first_not_before(entries_, peer);
    return it != entries_.end() && it->peer == peer ? it->value : missing;
  }

  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }
  T sum() const {
    T total{};
    for (const Entry& e : entries_)
      total += e.value;
    return total;
  }
  void clear() { entries_.clear(); }

  bool operator==(const PeerValues&) const = default;

 private:
  // The first entry whose peer is not below `peer` (const or not, as `entries` is).
  template <typename Entries>
  static auto first_not_before(Entries& entries, int peer) {
    return std::lower_bound(entries.begin(), entries.end(), peer,
                            [](const Entry& e, int p) { return e.peer < p; });
  }

  std::vector<Entry> entries_;
};

}  // namespace kf
