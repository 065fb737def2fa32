// RadixHeap: a monotone priority queue for simulated events, keyed by (time, sequence).
//
// A discrete-event simulation never schedules before now, so every key pushed is at least the
// last one popped. A radix heap uses that: an entry waits in the bucket named by the highest bit
// in which its key differs from the last key popped, so a push is one bit scan and an append.
// Only when the lowest bucket runs dry is the next non-empty one scanned for its least key, which
// becomes the new reference, and its entries move to lower buckets. Each entry moves a few times
// at most, through contiguous vectors, where a binary heap of thousands of events does a dozen
// unpredictable comparisons on every push and pop (the flow world's hottest code before this).
//
// Keys must be unique (the sequence numbers make them so) and no key pushed may be less than the
// last one popped; pops then come out in exactly (time, sequence) order.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace kf {

template <typename Entry>  // with fields `std::int64_t at` (>= 0) and `std::uint64_t seq`
class RadixHeap {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  void push(const Entry& e) {
    if (e.at < last_at_ || (e.at == last_at_ && e.seq < last_seq_))
      throw std::logic_error("RadixHeap: a key below the last one popped");
    place(e);
    ++size_;
  }

  // The least entry (call only when not empty).
  Entry pop() {
    if (buckets_[0].empty()) refill();
    const Entry e = buckets_[0].back();
    buckets_[0].pop_back();
    if (buckets_[0].empty()) used_[0] &= ~std::uint64_t{1};
    --size_;
    return e;
  }

  // Drops every entry for which `drop(entry)` is true; the order of the rest is unchanged.
  template <typename Pred>
  void erase_if(Pred drop) {
    for (std::size_t b = 0; b < kBuckets; ++b) {
      const std::size_t before = buckets_[b].size();
      std::erase_if(buckets_[b], drop);
      size_ -= before - buckets_[b].size();
      if (buckets_[b].empty()) used_[b / 64] &= ~(std::uint64_t{1} << (b % 64));
    }
  }

 private:
  // Bucket 0 holds the key equal to the reference; bucket 1 + i a key whose highest bit
  // differing from it is bit i of the sequence; bucket 65 + i, bit i of the time.
  static constexpr std::size_t kBuckets = 129;

  std::size_t bucket_of(const Entry& e) const {
    if (e.at != last_at_) {
      return 64 + static_cast<std::size_t>(std::bit_width(static_cast<std::uint64_t>(e.at) ^
                                                          static_cast<std::uint64_t>(last_at_)));
    }
    return static_cast<std::size_t>(std::bit_width(e.seq ^ last_seq_));
  }

  void place(const Entry& e) {
    const std::size_t b = bucket_of(e);
    buckets_[b].push_back(e);
    used_[b / 64] |= std::uint64_t{1} << (b % 64);
  }

  // Bucket 0 is empty: the least non-empty bucket holds the least key; it becomes the reference
  // and that bucket's entries spread over the buckets below it (the least one into bucket 0).
  void refill() {
    std::size_t b = 0;
    for (std::size_t w = 0; w < used_.size(); ++w) {
      if (used_[w] != 0) {
        b = w * 64 + static_cast<std::size_t>(std::countr_zero(used_[w]));
        break;
      }
    }
    std::vector<Entry>& from = buckets_[b];
    const Entry* least = &from[0];
    for (const Entry& e : from) {
      if (e.at < least->at || (e.at == least->at && e.seq < least->seq)) least = &e;
    }
    last_at_ = least->at;
    last_seq_ = least->seq;
    used_[b / 64] &= ~(std::uint64_t{1} << (b % 64));
    // Every entry lands in a bucket below b, so `from` is not appended to while read.
    for (const Entry& e : from)
      place(e);
    from.clear();
  }

  std::array<std::vector<Entry>, kBuckets> buckets_;
  std::array<std::uint64_t, 3> used_{};  // bit b: bucket b is not empty
  std::int64_t last_at_ = 0;
  std::uint64_t last_seq_ = 0;
  std::size_t size_ = 0;
};

}  // namespace kf
