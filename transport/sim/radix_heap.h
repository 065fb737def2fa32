// RadixHeap: a monotone priority queue for simulated events: least time first, and entries due at
// the same time in the order they were pushed.
//
// A discrete-event simulation never schedules before now, so every time pushed is at least the
// last one popped. A radix heap uses that: an entry waits in the bucket named by the highest bit
// in which its time differs from the last time popped (bucket 0: the same time), so a push is one
// bit scan and an append. Only when bucket 0 runs dry is the next non-empty bucket scanned for its
// least time, which becomes the new reference, and its entries move to lower buckets. Each entry
// moves a few times at most, through contiguous vectors, where a binary heap of thousands of
// events does a dozen unpredictable comparisons on every push and pop.
//
// Same-time entries keep their push order for free: they always share a bucket (the bucket
// depends on the time alone), they are appended in push order, and moving a bucket down keeps
// its order. Bucket 0 is read from the front.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace kf {

template <typename Entry>  // with a field `std::int64_t at`
class RadixHeap {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  void push(const Entry& e) {
    if (e.at < last_at_) throw std::logic_error("RadixHeap: a time before the last one popped");
    place(e);
    ++size_;
  }

  // The least entry (call only when not empty).
  Entry pop() {
    if (head_ == buckets_[0].size()) refill();
    const Entry e = buckets_[0][head_++];
    --size_;
    return e;
  }

  // Drops every entry for which `drop(entry)` is true; the order of the rest is unchanged.
  template <typename Pred>
  void erase_if(Pred drop) {
    std::vector<Entry>& now = buckets_[0];
    now.erase(now.begin(), now.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
    for (std::size_t b = 0; b < kBuckets; ++b) {
      const std::size_t before = buckets_[b].size();
      std::erase_if(buckets_[b], drop);
      size_ -= before - buckets_[b].size();
      if (b > 0 && buckets_[b].empty()) used_ &= ~(std::uint64_t{1} << (b - 1));
    }
  }

 private:
  // Bucket 0: the reference time; bucket 1 + i: times whose highest bit differing from it is i.
  static constexpr std::size_t kBuckets = 65;

  void place(const Entry& e) {
    const auto b = static_cast<std::size_t>(
        std::bit_width(static_cast<std::uint64_t>(e.at) ^ static_cast<std::uint64_t>(last_at_)));
    buckets_[b].push_back(e);
    if (b > 0) used_ |= std::uint64_t{1} << (b - 1);
  }

  // Bucket 0 is used up: the least non-empty bucket holds the least time; it becomes the
  // reference and that bucket's entries spread, in order, over the buckets below it.
  void refill() {
    buckets_[0].clear();
    head_ = 0;
    const auto b = 1 + static_cast<std::size_t>(std::countr_zero(used_));
    std::vector<Entry>& from = buckets_[b];
    std::int64_t least = from[0].at;
    for (const Entry& e : from)
      least = e.at < least ? e.at : least;
    last_at_ = least;
    used_ &= ~(std::uint64_t{1} << (b - 1));
    // Every entry lands in a bucket below b, so `from` is not appended to while read.
    for (const Entry& e : from)
      place(e);
    from.clear();
  }

  std::array<std::vector<Entry>, kBuckets> buckets_;
  std::size_t head_ = 0;    // bucket 0's entries before this one have been popped
  std::uint64_t used_ = 0;  // bit i: bucket 1 + i is not empty
  std::int64_t last_at_ = 0;
  std::size_t size_ = 0;
};

}  // namespace kf
