#include "real/event_loop.h"

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
    if (stopping_) return 0;  // never fires; cancel(0) is harmless
    id = timers_.add(now() + delay, std::move(task));
  }
  wake_.notify_one();
  return id;
}

void EventLoop::cancel(TimerId id) {
  std::lock_guard lock(mu_);
  timers_.cancel(id);
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
    } else if (auto due = timers_.pop_due(now())) {
      task = std::move(*due);
    } else if (const TimePoint next = timers_.next_deadline(); next != TimePoint::max()) {
      wake_.wait_for(lock, next - now());
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
  auto dropped_timers = timers_.take();
  lock.unlock();
}

}  // namespace kf
