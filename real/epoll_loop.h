// EpollLoop: the real world's Executor for a peer with sockets. One thread runs posted tasks,
// fires timers (timerfd, nanosecond deadlines on the steady clock) and dispatches readiness of
// watched file descriptors, so the engine, the transport and every socket of a peer live on one
// thread with no locks. post/post_after may be called from any thread (an eventfd wakes the loop).
#pragma once

#include <sys/epoll.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "real/fd.h"
#include "real/timer_queue.h"
#include "runtime/executor.h"

namespace kf {

class EpollLoop final : public Executor {
 public:
  using IoCallback = std::function<void(std::uint32_t events)>;
  using WatchId = std::uint64_t;

  // What the loop looks at on every turn besides its descriptors, with no syscall: a transport's
  // shared-memory rings (real/shm_ring.h). poll() runs whatever has come and says whether
  // anything had. Before the loop sleeps it calls arm(), which asks whoever fills the poller to
  // wake the loop through a watched descriptor and returns false when work already waits (the
  // loop then does not sleep); disarm() follows the sleep, or a refused arm().
  class Poller {
   public:
    virtual ~Poller() = default;
    virtual bool poll() = 0;
    virtual bool arm() = 0;
    virtual void disarm() = 0;
  };

  EpollLoop();
  ~EpollLoop() override;  // stops and joins; tasks not yet run are dropped
  EpollLoop(const EpollLoop&) = delete;
  EpollLoop& operator=(const EpollLoop&) = delete;

  // Busy polling, for a peer with cores of its own (as MPI's progress and NCCL's proxy threads
  // poll): the loop never sleeps in epoll_wait and other threads' posts need no eventfd wake-up,
  // so a small message costs no wake-up on either side. Set it before other threads post: a
  // post racing with the switch back to sleeping could be left until the next event.
  void set_busy_poll(bool on) {
    busy_poll_.store(on, std::memory_order_relaxed);
    wake();  // the loop may be asleep in epoll_wait already: it must see the change
  }
  bool busy_poll() const { return busy_poll_.load(std::memory_order_relaxed); }

  TimePoint now() const override;
  void post(Task task) override;
  TimerId post_after(Duration delay, Task task) override;
  void cancel(TimerId id) override;

  // Loop thread only. `fd` stays owned by the caller; unwatch it before closing it. Callbacks get
  // the epoll event bits; a callback may unwatch any fd, its own included.
  WatchId watch(int fd, std::uint32_t events, IoCallback callback);
  void modify(WatchId id, std::uint32_t events);
  void unwatch(WatchId id);
  // Loop thread only. The poller is not owned; remove it before it dies (a poller may remove
  // itself or another from inside poll()).
  void add_poller(Poller* poller);
  void remove_poller(Poller* poller);

  void stop();  // idempotent; the loop exits after the task or callback running now
  bool in_loop_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // Runs `fn` on the loop and waits for its result (or exception). Not from the loop itself.
  template <typename F>
  auto call(F&& fn) -> std::invoke_result_t<F&> {
    using R = std::invoke_result_t<F&>;
    if (in_loop_thread()) return fn();
    std::packaged_task<R()> task(std::forward<F>(fn));
    auto result = task.get_future();
    post([&task] { task(); });
    return result.get();
  }

 private:
  struct Watch {
    int fd;
    std::shared_ptr<IoCallback> callback;
  };
  void run();
  // Polls the watched descriptors without sleeping for up to kPollBeforeSleep, or until an event,
  // a post or stop: epoll_wait's result (0: nothing came).
  // `polled` says whether the pollers found work meanwhile.
  int poll_briefly(std::array<epoll_event, 64>& events, bool& polled);
  void wake();
  void arm_timer(TimePoint deadline);
  bool run_ready_work();  // tasks and due timers; true if it ran anything
  bool run_pollers();     // true if any poller found work
  bool arm_pollers();     // false: a poller has work, do not sleep
  void disarm_pollers();

  const std::chrono::steady_clock::time_point epoch_;
  Fd epoll_;
  Fd wake_fd_;   // eventfd: post() from other threads
  Fd timer_fd_;  // timerfd: the earliest timer deadline
  mutable std::mutex mu_;
  std::deque<Task> tasks_;
  TimerQueue timers_;
  bool stopping_ = false;
  std::atomic<bool> busy_poll_{false};
  bool polling_ = false;  // under mu_: the loop is in poll_briefly
  static constexpr auto kPollBeforeSleep = std::chrono::microseconds(50);
  TimePoint armed_ = TimePoint::max();
  // Loop thread only.
  std::unordered_map<WatchId, Watch> watches_;
  WatchId next_watch_ = 2;        // 0 and 1 are the eventfd and timerfd
  std::vector<Poller*> pollers_;  // removed ones are null until the next turn compacts them
  std::thread thread_;            // last: starts after everything above exists
};

}  // namespace kf
