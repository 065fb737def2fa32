#include "sim/flow/event_queue.h"

#include <algorithm>
#include <utility>

namespace kf {

Executor::TimerId EventQueue::post_after(Duration delay, Task task) {
  return schedule_at(now_ + std::max<std::int64_t>(0, delay.count()), std::move(task));
}

Executor::TimerId EventQueue::schedule_at(std::int64_t at_ns, Task task) {
  std::uint32_t slot;
  if (!free_.empty()) {
    slot = free_.back();
    free_.pop_back();
  } else {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.task = std::move(task);
  s.live = true;
  queue_.push({std::max(at_ns, now_), nullptr, slot, 0});
  return (static_cast<TimerId>(s.generation) << 32) | slot;
}

void EventQueue::cancel(TimerId id) {
  const auto slot = static_cast<std::uint32_t>(id & 0xFFFFFFFFu);
  if (slot >= slots_.size()) return;
  Slot& s = slots_[slot];
  if (!s.live || s.generation != static_cast<std::uint32_t>(id >> 32)) return;
  // The heap entry stays and is skipped when it comes up; the slot is freed then.
  s.live = false;
  s.task = nullptr;
  ++cancelled_;
  if (cancelled_ > 256 && cancelled_ * 2 > queue_.size()) compact();
}

void EventQueue::compact() {
  queue_.erase_if([this](const Entry& e) {
    if (e.handler != nullptr) return false;
    Slot& s = slots_[e.argument];
    if (s.live) return false;
    ++s.generation;
    free_.push_back(static_cast<std::uint32_t>(e.argument));
    return true;
  });
  cancelled_ = 0;
}

void EventQueue::run() {
  stopped_ = false;
  while (!stopped_ && !queue_.empty()) {
    const Entry e = queue_.pop();
    // At a thousand workers the next event's object is cold: fetching it now overlaps its miss
    // with this event's work.
    if (const Entry* next = queue_.peek_ready(); next != nullptr) {
      if (next->handler != nullptr) {
        // Four lines: a flow world connection keeps what a message touches there.
        const auto* at = reinterpret_cast<const char*>(next->handler);
        __builtin_prefetch(at);
        __builtin_prefetch(at + 64);
        __builtin_prefetch(at + 128);
        __builtin_prefetch(at + 192);
      } else {
        __builtin_prefetch(&slots_[next->argument]);
      }
    }
    if (e.handler != nullptr) {
      now_ = e.at;
      ++executed_;
      e.handler->fire(e.argument);
      continue;
    }
    Slot& s = slots_[e.argument];
    const bool live = s.live;
    Task task = std::move(s.task);
    s.task = nullptr;
    s.live = false;
    ++s.generation;
    free_.push_back(static_cast<std::uint32_t>(e.argument));
    if (!live) {
      --cancelled_;
      continue;
    }
    now_ = e.at;
    ++executed_;
    task();
  }
}

}  // namespace kf
