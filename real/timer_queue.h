// TimerQueue: the timers of one event loop, ordered by deadline (ties fire in the order they were
// set) and cancellable by id. Not thread-safe: each loop guards it with its own mutex.
//
// Every collective sets a timer for its deadline and cancels it when it completes, so a steady run
// adds and removes a timer per operation: the nodes of both maps are kept (up to kSpareNodes of
// each) for the next timer instead of going back to the allocator.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/executor.h"

namespace kf {

class TimerQueue {
 public:
  using Task = Executor::Task;
  using TimerId = Executor::TimerId;

  TimerId add(TimePoint deadline, Task task) {
    const TimerId id = ++next_;
    // Hinted at the end: a collective's deadline is usually the latest yet (the same timeout
    // from a later start), and there the hint saves the search.
    if (spare_timers_.empty()) {
      timers_.emplace_hint(timers_.end(), std::make_pair(deadline, id), std::move(task));
    } else {
      auto node = std::move(spare_timers_.back());
      spare_timers_.pop_back();
      node.key() = {deadline, id};
      node.mapped() = std::move(task);
      timers_.insert(timers_.end(), std::move(node));
    }
    if (spare_deadlines_.empty()) {
      deadlines_.emplace(id, deadline);
    } else {
      auto node = std::move(spare_deadlines_.back());
      spare_deadlines_.pop_back();
      node.key() = id;
      node.mapped() = deadline;
      deadlines_.insert(std::move(node));
    }
    return id;
  }

  void cancel(TimerId id) {
    const auto it = deadlines_.find(id);
    if (it == deadlines_.end()) return;
    auto timer = timers_.extract({it->second, id});
    timer.mapped() = nullptr;  // the task's captures go now, as when it is erased
    keep(spare_timers_, std::move(timer));
    keep(spare_deadlines_, deadlines_.extract(it));
  }

  // TimePoint::max() when there is none.
  TimePoint next_deadline() const {
    return timers_.empty() ? TimePoint::max() : timers_.begin()->first.first;
  }

  // The earliest timer's task if it is due at `now`, removed from the queue.
  std::optional<Task> pop_due(TimePoint now) {
    if (timers_.empty() || timers_.begin()->first.first > now) return std::nullopt;
    auto node = timers_.extract(timers_.begin());
    keep(spare_deadlines_, deadlines_.extract(node.key().second));
    std::optional<Task> task = std::move(node.mapped());
    node.mapped() = nullptr;
    keep(spare_timers_, std::move(node));
    return task;
  }

  // Empties the queue, handing the tasks over so the caller can destroy them outside its lock
  // (a capture's destructor may post).
  TimerQueue take() { return std::exchange(*this, TimerQueue{}); }

 private:
  static constexpr std::size_t kSpareNodes = 64;
  using Timers = std::map<std::pair<TimePoint, TimerId>, Task>;
  using Deadlines = std::unordered_map<TimerId, TimePoint>;

  template <typename Node>
  static void keep(std::vector<Node>& spares, Node node) {
    if (!node.empty() && spares.size() < kSpareNodes) spares.push_back(std::move(node));
  }

  Timers timers_;
  Deadlines deadlines_;
  std::vector<Timers::node_type> spare_timers_;
  std::vector<Deadlines::node_type> spare_deadlines_;
  TimerId next_ = 0;
};

}  // namespace kf
