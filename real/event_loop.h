// EventLoop: the real world's Executor. One thread runs posted tasks in order and fires timers on
// the steady clock. The runtime state of a peer lives on its loop, so it needs no locks.
#pragma once

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "real/timer_queue.h"
#include "runtime/executor.h"

namespace kf {

class EventLoop final : public Executor {
 public:
  EventLoop();
  ~EventLoop() override;  // stops and joins; tasks not yet run are dropped
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  TimePoint now() const override;
  void post(Task task) override;
  TimerId post_after(Duration delay, Task task) override;
  void cancel(TimerId id) override;

  // Stops after the task running now; later tasks and timers are dropped. Idempotent.
  void stop();
  bool in_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // Runs `fn` on the loop and waits for its result (or exception). Not from the loop itself.
  template <typename F>
  auto call(F&& fn) -> std::invoke_result_t<F&> {
    using R = std::invoke_result_t<F&>;
    if (in_loop_thread()) return fn();  // waiting on ourselves would never return
    std::packaged_task<R()> task(std::forward<F>(fn));
    auto result = task.get_future();
    post([&task] { task(); });
    return result.get();
  }

 private:
  void run();

  const std::chrono::steady_clock::time_point epoch_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;
  TimerQueue timers_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace kf
