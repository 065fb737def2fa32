// LaneQueue: the simulator's event order (least time first, same-time entries in push order)
// for pushes that come mostly in order.
//
// A world posts each message's arrival a transfer time ahead of now, and that time is nearly the
// same for every message of a kind (a ring's hop within a leaf, or across the spines), so the
// pushes form a few interleaved sequences, each in time order. A lane holds one such sequence:
// a push goes to the lane whose last entry is the latest not after it (best fit, as patience
// sorting deals cards), so appending keeps every lane sorted; a push that fits no lane (an
// early one among late ones) waits in a RadixHeap. A pop takes the least of the lanes' fronts
// and the heap's least. At a thousand workers, 8 lanes take 99% of the pushes, and an event costs
// a few comparisons where the radix heap alone moved and sorted each entry.
//
// Ties between a lane and the heap, or two lanes, go by a push number the queue stamps on each
// entry (`seq`): within a lane and within the heap push order holds already.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "sim/flow/radix_heap.h"

namespace kf {

template <typename Entry>  // with fields `std::int64_t at` and `std::uint64_t seq`
class LaneQueue {
 public:
  static constexpr std::size_t kLanes = 8;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  // Entries pushed so far that fitted no lane.
  std::uint64_t overflowed() const { return overflowed_; }

  void push(Entry e) {
    if (e.at < last_popped_) throw std::logic_error("LaneQueue: a time before the last one popped");
    e.seq = pushed_++;
    // The lanes by their last entry, latest first (empty ones last): the first that is not
    // after e is the best fit, and appending e keeps that order.
    std::size_t k = 0;
    while (k < kLanes && back_at_[order_[k]] > e.at)
      ++k;
    if (next_ >= 0 && e.at < front_at(next_)) next_ = -1;
    ++size_;
    if (k == kLanes) {
      ++overflowed_;
      heap_.push(e);
      return;
    }
    const std::size_t fit = order_[k];
    lanes_[fit].push_back(e);
    back_at_[fit] = e.at;
    if (lanes_[fit].size() == 1) front_at_[fit] = e.at;  // (the latest seq: never before a tie)
  }

  // The entry pop() returns next (null if empty): lets the caller prefetch what it will touch.
  const Entry* peek_ready() {
    if (size_ == 0) return nullptr;
    if (next_ < 0) next_ = least();
    return &front(next_);
  }

  // The least entry (call only when not empty).
  Entry pop() {
    if (next_ < 0) next_ = least();
    const int from = next_;
    next_ = -1;
    const Entry e = from == kHeap ? heap_.pop() : pop_lane(static_cast<std::size_t>(from));
    last_popped_ = e.at;
    --size_;
    return e;
  }

  // Drops every entry for which `drop(entry)` is true; the order of the rest is unchanged.
  template <typename Pred>
  void erase_if(Pred drop) {
    for (std::size_t i = 0; i < kLanes; ++i) {
      const std::size_t had = lanes_[i].size();
      lanes_[i].erase_if(drop);
      size_ -= had - lanes_[i].size();
      const bool empty = lanes_[i].size() == 0;
      back_at_[i] = empty ? kEmpty : lanes_[i].back().at;
      front_at_[i] = empty ? kNone : lanes_[i].front().at;
    }
    std::stable_sort(order_.begin(), order_.end(),
                     [this](std::uint8_t a, std::uint8_t b) { return back_at_[a] > back_at_[b]; });
    const std::size_t had = heap_.size();
    heap_.erase_if(drop);
    size_ -= had - heap_.size();
    next_ = -1;
  }

 private:
  static constexpr int kHeap = static_cast<int>(kLanes);
  // An empty lane's last time: before any, so it is the fit of last resort; and its first time:
  // after any.
  static constexpr std::int64_t kEmpty = std::numeric_limits<std::int64_t>::min();
  static constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

  // A ring buffer of entries in push order.
  class Lane {
   public:
    std::size_t size() const { return count_; }
    const Entry& front() const { return slots_[head_]; }
    const Entry& back() const { return slots_[(head_ + count_ - 1) & mask()]; }
    void push_back(const Entry& e) {
      if (count_ == slots_.size()) grow();
      slots_[(head_ + count_) & mask()] = e;
      ++count_;
    }
    Entry pop_front() {
      const Entry e = slots_[head_];
      head_ = (head_ + 1) & mask();
      --count_;
      return e;
    }
    template <typename Pred>
    void erase_if(Pred drop) {
      std::size_t kept = 0;
      for (std::size_t i = 0; i < count_; ++i) {
        const Entry& e = slots_[(head_ + i) & mask()];
        if (!drop(e)) slots_[(head_ + kept++) & mask()] = e;
      }
      count_ = kept;
    }

   private:
    std::size_t mask() const { return slots_.size() - 1; }
    void grow() {
      std::vector<Entry> bigger(slots_.empty() ? 64 : 2 * slots_.size());
      for (std::size_t i = 0; i < count_; ++i)
        bigger[i] = slots_[(head_ + i) & mask()];
      slots_ = std::move(bigger);
      head_ = 0;
    }
    std::vector<Entry> slots_;  // a power of two long
    std::size_t head_ = 0;
    std::size_t count_ = 0;
  };

  Entry pop_lane(std::size_t i) {
    const Entry e = lanes_[i].pop_front();
    if (lanes_[i].size() > 0) {
      front_at_[i] = lanes_[i].front().at;
      return e;
    }
    // Empty: to the end of the order.
    back_at_[i] = kEmpty;
    front_at_[i] = kNone;
    std::size_t k = 0;
    while (order_[k] != i)
      ++k;
    for (; k + 1 < kLanes; ++k)
      order_[k] = order_[k + 1];
    order_[kLanes - 1] = static_cast<std::uint8_t>(i);
    return e;
  }
  const Entry& front(int where) {
    return where == kHeap ? heap_.top() : lanes_[static_cast<std::size_t>(where)].front();
  }
  std::int64_t front_at(int where) {
    return where == kHeap ? heap_.top().at : front_at_[static_cast<std::size_t>(where)];
  }
  static bool before(const Entry& a, const Entry& b) {
    return a.at < b.at || (a.at == b.at && a.seq < b.seq);
  }
  // Where the least entry waits (a lane, or kHeap); only when not empty.
  int least() {
    std::size_t best = 0;
    for (std::size_t i = 1; i < kLanes; ++i) {
      if (front_at_[i] < front_at_[best]) {
        best = i;
      } else if (front_at_[i] == front_at_[best] && front_at_[i] != kNone &&
                 lanes_[i].front().seq < lanes_[best].front().seq) {
        best = i;
      }
    }
    if (front_at_[best] == kNone) return kHeap;  // every lane is empty
    if (!heap_.empty() && before(heap_.top(), lanes_[best].front())) return kHeap;
    return static_cast<int>(best);
  }

  std::array<Lane, kLanes> lanes_;
  std::array<std::int64_t, kLanes> back_at_ = filled(kEmpty);
  std::array<std::int64_t, kLanes> front_at_ = filled(kNone);
  std::array<std::uint8_t, kLanes> order_ = identity();  // lanes by back_at_, latest first
  RadixHeap<Entry> heap_;
  int next_ = -1;  // where the least entry waits, if known
  std::int64_t last_popped_ = 0;
  std::uint64_t pushed_ = 0;
  std::uint64_t overflowed_ = 0;
  std::size_t size_ = 0;

  static constexpr std::array<std::uint8_t, kLanes> identity() {
    std::array<std::uint8_t, kLanes> a{};
    for (std::size_t i = 0; i < kLanes; ++i)
      a[i] = static_cast<std::uint8_t>(i);
    return a;
  }
  static constexpr std::array<std::int64_t, kLanes> filled(std::int64_t v) {
    std::array<std::int64_t, kLanes> a{};
    a.fill(v);
    return a;
  }
};

}  // namespace kf
