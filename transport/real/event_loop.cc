#include "transport/real/event_loop.h"

namespace kf {

EventLoop::EventLoop() : epoch_(std::chrono::steady_clock::now()), thread_([this] { run(); }) {}

EventLoop::~EventLoop() {
  stop();
  if (thread_.joinable()) thread_.join();
}

TimePoint EventLoop::now() const {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - epoch_));
}

void EventLoop::post(Task task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

Executor::TimerId EventLoop::post_after(Duration delay, Task task) {
  TimerId id;
  {
    std::lock_guard lock(mu_);
    id = ++next_timer_;
    if (stopping_) return id;
    const TimePoint deadline = now() + delay;
    timers_.emplace(std::make_pair(deadline, id), std::move(task));
    deadlines_.emplace(id, deadline);
  }
  wake_.notify_one();
  return id;
}

void EventLoop::cancel(TimerId id) {
  std::lock_guard lock(mu_);
  const auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return;
  timers_.erase({it->second, id});
  deadlines_.erase(it);
}

void EventLoop::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
}

void EventLoop::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    Task task;
    if (!tasks_.empty()) {
      task = std::move(tasks_.front());
      tasks_.pop_front();
    } else if (!timers_.empty() && timers_.begin()->first.first <= now()) {
      auto node = timers_.extract(timers_.begin());
      deadlines_.erase(node.key().second);
      task = std::move(node.mapped());
    } else if (!timers_.empty()) {
      const auto wait = timers_.begin()->first.first - now();
      wake_.wait_for(lock, wait);
      continue;
    } else {
      wake_.wait(lock);
      continue;
    }
    lock.unlock();
    task();
    task = nullptr;  // destroy captures outside the lock too
    lock.lock();
  }
  // Destroy what was dropped outside the lock: a capture's destructor may post.
  auto dropped_tasks = std::move(tasks_);
  auto dropped_timers = std::move(timers_);
  deadlines_.clear();
  lock.unlock();
}

}  // namespace kf
