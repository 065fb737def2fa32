// TimerQueue: the timers of one event loop, ordered by deadline (ties fire in the order they were
// set) and cancellable by id. Not thread-safe: each loop guards it with its own mutex.
//
// Every collective sets a timer for its deadline and cancels it when it completes, so a steady run
// adds and removes a timer per operation. The last few timers set wait in a short array (`recent_`)
// where adding one is an append and cancelling it a scan of a few entries; only when that array is
// full do its timers move into the ordered map. A blocking collective's timer is set and cancelled
// there, without touching the map, whose insert and erase were a tenth of a busy-polling 8-byte
// allreduce's time between two workers (docs/performance.md). The map's nodes are kept (up to
// kSpareNodes of each) for the next timers that go there instead of going back to the allocator.
#pragma once

#include <algorithm>
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
    if (recent_.size() == kRecent) settle_recent();
    recent_.push_back({deadline, id, std::move(task)});
    return id;
  }

  void cancel(TimerId id) {
    for (std::size_t i = recent_.size(); i-- > 0;) {  // the latest set first: usually the one
      if (recent_[i].id != id) continue;
      if (i + 1 != recent_.size()) recent_[i] = std::move(recent_.back());
      recent_.pop_back();  // the task's captures go now, as when it is erased
      return;
    }
    const auto it = deadlines_.find(id);
    if (it == deadlines_.end()) return;
    auto timer = timers_.extract({it->second, id});
    timer.mapped() = nullptr;  // the task's captures go now, as when it is erased
    keep(spare_timers_, std::move(timer));
    keep(spare_deadlines_, deadlines_.extract(it));
  }

  // TimePoint::max() when there is none.
  TimePoint next_deadline() const {
    TimePoint next = timers_.empty() ? TimePoint::max() : timers_.begin()->first.first;
    for (const Recent& r : recent_)
      next = std::min(next, r.deadline);
    return next;
  }

  // The earliest timer's task (by deadline, then by the order set) if it is due at `now`, removed
  // from the queue.
  std::optional<Task> pop_due(TimePoint now) {
    std::size_t earliest = recent_.size();
    for (std::size_t i = 0; i < recent_.size(); ++i) {
      const Recent& r = recent_[i];
      if (r.deadline > now) continue;
      if (earliest == recent_.size() || key(r) < key(recent_[earliest])) earliest = i;
    }
    const bool map_due = !timers_.empty() && timers_.begin()->first.first <= now;
    if (earliest < recent_.size() &&
        (!map_due || key(recent_[earliest]) < timers_.begin()->first)) {
      std::optional<Task> task = std::move(recent_[earliest].task);
      if (earliest + 1 != recent_.size()) recent_[earliest] = std::move(recent_.back());
      recent_.pop_back();
      return task;
    }
    if (!map_due) return std::nullopt;
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
  // Enough for a blocking collective's deadline beside the loop's own few timers; the timers of
  // many collectives in flight at once (a DDP step's buckets) go on into the map.
  static constexpr std::size_t kRecent = 8;
  using Key = std::pair<TimePoint, TimerId>;
  using Timers = std::map<Key, Task>;
  using Deadlines = std::unordered_map<TimerId, TimePoint>;
  struct Recent {
    TimePoint deadline;
    TimerId id;
    Task task;
  };
  static Key key(const Recent& r) { return {r.deadline, r.id}; }

  template <typename Node>
  static void keep(std::vector<Node>& spares, Node node) {
    if (!node.empty() && spares.size() < kSpareNodes) spares.push_back(std::move(node));
  }

  // Moves the recent timers into the map.
  void settle_recent() {
    for (Recent& r : recent_) {
      // Hinted at the end: a collective's deadline is usually the latest yet (the same timeout
      // from a later start), and there the hint saves the search.
      if (spare_timers_.empty()) {
        timers_.emplace_hint(timers_.end(), key(r), std::move(r.task));
      } else {
        auto node = std::move(spare_timers_.back());
        spare_timers_.pop_back();
        node.key() = key(r);
        node.mapped() = std::move(r.task);
        timers_.insert(timers_.end(), std::move(node));
      }
      if (spare_deadlines_.empty()) {
        deadlines_.emplace(r.id, r.deadline);
      } else {
        auto node = std::move(spare_deadlines_.back());
        spare_deadlines_.pop_back();
        node.key() = r.id;
        node.mapped() = r.deadline;
        deadlines_.insert(std::move(node));
      }
    }
    recent_.clear();
  }

  std::vector<Recent> recent_;
  Timers timers_;
  Deadlines deadlines_;
  std::vector<Timers::node_type> spare_timers_;
  std::vector<Deadlines::node_type> spare_deadlines_;
  TimerId next_ = 0;
};

}  // namespace kf
