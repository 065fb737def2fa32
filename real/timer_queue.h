// TimerQueue: the timers of one event loop, ordered by deadline (ties fire in the order they were
// set) and cancellable by id. Not thread-safe: each loop guards it with its own mutex.
#pragma once

#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "runtime/executor.h"

namespace kf {

class TimerQueue {
 public:
  using Task = Executor::Task;
  using TimerId = Executor::TimerId;

  TimerId add(TimePoint deadline, Task task) {
    const TimerId id = ++next_;
    timers_.emplace(std::make_pair(deadline, id), std::move(task));
    deadlines_.emplace(id, deadline);
    return id;
  }

  void cancel(TimerId id) {
    const auto it = deadlines_.find(id);
    if (it == deadlines_.end()) return;
    timers_.erase({it->second, id});
    deadlines_.erase(it);
  }

  // TimePoint::max() when there is none.
  TimePoint next_deadline() const {
    return timers_.empty() ? TimePoint::max() : timers_.begin()->first.first;
  }

  // The earliest timer's task if it is due at `now`, removed from the queue.
  std::optional<Task> pop_due(TimePoint now) {
    if (timers_.empty() || timers_.begin()->first.first > now) return std::nullopt;
    auto node = timers_.extract(timers_.begin());
    deadlines_.erase(node.key().second);
    return std::move(node.mapped());
  }

  // Empties the queue, handing the tasks over so the caller can destroy them outside its lock
  // (a capture's destructor may post).
  TimerQueue take() { return std::exchange(*this, TimerQueue{}); }

 private:
  std::map<std::pair<TimePoint, TimerId>, Task> timers_;
  std::unordered_map<TimerId, TimePoint> deadlines_;
  TimerId next_ = 0;
};

}  // namespace kf
