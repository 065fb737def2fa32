// RingQueue: a FIFO over one growable circular buffer that keeps its capacity. A simulated
// connection queues and dequeues a message for every message it carries; std::deque allocates
// and frees a block every few messages (a block holds two), which at a thousand workers cost an
// allocation per message and a cold block to touch. Here a queue that stays short never
// allocates after its first messages.
#pragma once

#include <cassert>
#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace kf {

template <typename T>
class RingQueue {
 public:
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The i-th element from the front.
  T& operator[](std::size_t i) {
    assert(i < size_);
    return slots_[index(i)];
  }
  const T& operator[](std::size_t i) const {
    assert(i < size_);
    return slots_[index(i)];
  }
  T& front() { return (*this)[0]; }

  // Built in place, in a slot that holds a default or moved-from T (nothing to release).
  template <typename... Args>
  void emplace_back(Args&&... args) {
    static_assert(std::is_nothrow_constructible_v<T, Args&&...>,
                  "a slot is rebuilt in place: building must not throw");
    if (size_ == slots_.size()) grow();
    T* slot = &slots_[index(size_)];
    std::destroy_at(slot);
    std::construct_at(slot, std::forward<Args>(args)...);
    ++size_;
  }

  void pop_front() {
    assert(size_ > 0);
    slots_[head_] = T();  // release what it holds now, not when the slot is reused
    advance();
  }
  // Moves the front element out and drops it. What the slot keeps is T's moved-from state, which
  // for the queue's users (messages: strings, vectors, shared pointers) holds nothing; it is
  // replaced when the slot is reused.
  T take_front() {
    assert(size_ > 0);
    T out = std::move(slots_[head_]);
    advance();
    return out;
  }

  // Drops the elements from position `keep` to the back.
  void truncate(std::size_t keep) {
    while (size_ > keep) {
      slots_[index(size_ - 1)] = T();
      --size_;
    }
  }

 private:
  void advance() {
    head_ = head_ + 1 == slots_.size() ? 0 : head_ + 1;
    // Emptied: start over at the first slot, so a queue that holds one element at a time (a
    // ring's connection) keeps reusing one slot, which stays in cache, instead of walking them all.
    if (--size_ == 0) head_ = 0;
  }
  std::size_t index(std::size_t i) const {
    const std::size_t at = head_ + i;
    return at < slots_.size() ? at : at - slots_.size();
  }
  void grow() {
    std::vector<T> bigger(slots_.empty() ? 2 : 2 * slots_.size());
    for (std::size_t i = 0; i < size_; ++i)
      bigger[i] = std::move(slots_[index(i)]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

}  // namespace kf
