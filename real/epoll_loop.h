// EpollLoop: the real world's Executor for a peer with sockets. It runs posted tasks, fires timers
// (timerfd, nanosecond deadlines on the steady clock) and dispatches readiness of watched file
// descriptors, so the engine, the transport and every socket of a peer live in one loop with no
// locks of their own. post/post_after may be called from any thread (an eventfd wakes the loop).
//
// The loop's work runs on one thread at a time, its own by default. A caller waiting for a result
// may run the loop itself instead (drive_until), as MPI's progress engine runs in the caller: a
// small collective then costs no hand-off between threads, where a post and a completion each
// cost a wake-up. The loop's thread sleeps meanwhile and is not woken by the sockets the caller
// serves. "Loop context" below means whichever thread runs the loop's work at the moment.
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
#include <optional>
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
  // so a small message costs no wake-up on either side. While a caller drives the loop
  // (drive_until) the loop's thread sleeps all the same (parks_while_driven). Set it before other
  // threads post: a post racing with the switch back to sleeping could be left until the next
  // event.
  void set_busy_poll(bool on) {
    busy_poll_.store(on, std::memory_order_relaxed);
    wake();  // the loop may be asleep in epoll_wait already: it must see the change
  }
  bool busy_poll() const { return busy_poll_.load(std::memory_order_relaxed); }

  // Whether the worker has a core of its own (its host's workers do not outnumber the cores). A
  // driver spinning on a shared core yields it after every idle turn, for the other workers
  // there; on its own it keeps it while all its descriptors are quiet (a yield is a system call).
  // Off (shared) by default.
  void set_dedicated_core(bool on) { dedicated_core_.store(on, std::memory_order_relaxed); }
  bool dedicated_core() const { return dedicated_core_.load(std::memory_order_relaxed); }

  // How long the loop's thread and a driver poll after work before they sleep, kPollBeforeSleep
  // unless set. Where each worker of a host has a core, kf::Peer sets kOwnCorePollBeforeSleep: a
  // sleeping worker takes longer to wake (rung by a doorbell or its socket) than the default poll
  // lasts, and a reply over TCP longer to come, so two workers that each fell asleep before the
  // other's message came could go on waking each other for every call. Sets a driver's poll too.
  void set_poll_before_sleep(Duration poll) {
    poll_before_sleep_.store(poll.count(), std::memory_order_relaxed);
    driver_poll_before_sleep_.store(poll.count(), std::memory_order_relaxed);
  }
  Duration poll_before_sleep() const {
    return Duration(poll_before_sleep_.load(std::memory_order_relaxed));
  }
  // A driver's alone (drive_until; call it after set_poll_before_sleep): a caller that waits has
  // nothing else to run, so where the loop's thread should poll briefly for the compute beside it,
  // a driver may still poll as long as the other workers of its core take to run their turn.
  void set_driver_poll_before_sleep(Duration poll) {
    driver_poll_before_sleep_.store(poll.count(), std::memory_order_relaxed);
  }
  Duration driver_poll_before_sleep() const {
    return Duration(driver_poll_before_sleep_.load(std::memory_order_relaxed));
  }
  // True while the loop's thread polls after work, before it sleeps: posts then need no wake-up.
  // For tests and diagnostics.
  bool polling() const {
    std::lock_guard lock(mu_);
    return polling_;
  }
  // True while a driver sleeps in the loop's wait, past its poll after work. For tests and
  // diagnostics.
  bool driver_asleep() const {
    std::lock_guard lock(mu_);
    return driver_asleep_;
  }
  static constexpr Duration kPollBeforeSleep = std::chrono::microseconds(50);
  static constexpr Duration kOwnCorePollBeforeSleep = std::chrono::microseconds(200);

  // How long the loop's thread stays out of the way after the last caller that drove it left
  // (drive_until), kDriverLinger unless set: for experiments and tests.
  void set_driver_linger(Duration linger);

  TimePoint now() const override;
  void post(Task task) override;
  // post() by a caller that drives the loop next (drive_until): a loop whose last driver left
  // moments ago is not woken for it, since that caller runs it.
  void post_for_driver(Task task);
  TimerId post_after(Duration delay, Task task) override;
  TimerId post_at(TimePoint at, Task task) override;
  void cancel(TimerId id) override;

  // Loop context only. `fd` stays owned by the caller; unwatch it before closing it. Callbacks get
  // the epoll event bits; a callback may unwatch any fd, its own included.
  WatchId watch(int fd, std::uint32_t events, IoCallback callback);
  void modify(WatchId id, std::uint32_t events);
  // A quiet watch wakes the loop rarely: a listening socket, or a connection whose messages go
  // through a poller (a ring) and whose socket carries only doorbells and its end. A driver
  // spinning on a core of its own (set_dedicated_core) looks at the descriptors only every
  // kDescriptorLook while all of them are quiet, and at every turn otherwise.
  void set_quiet(WatchId id, bool quiet);
  void unwatch(WatchId id);
  // Loop context only. The poller is not owned; remove it before it dies (a poller may remove
  // itself or another from inside poll()).
  void add_poller(Poller* poller);
  void remove_poller(Poller* poller);

  void stop();  // idempotent; the loop exits after the task or callback running now
  // True on the thread that runs the loop's work now: the loop's own, or a driving caller.
  bool in_loop_thread() const {
    return owner_.load(std::memory_order_acquire) == std::this_thread::get_id();
  }

  // Runs the loop's work on the calling thread until done() is true, stop() is called or `end`
  // (if set) has passed, and returns done(). Until `spin_until` (always, if nullopt), pushed back
  // to driver_poll_before_sleep() after each turn that found work, it polls; after it, it sleeps in
  // the loop's own wait, woken by a message, a post, a timer or `end`, as the loop's thread would.
  // If another thread drives the loop meanwhile, the caller waits its turn only until `spin_until`
  // (or `end`), then returns false (it must wait for its result by other means; the loop's
  // thread takes over). A drive ended by `end` leaves the loop lingering, as one that finished
  // does: the caller stops waiting, it does not go on waiting without driving. `end` is read
  // from each turn's one clock reading, and needs no timer that could wake the loop's thread.
  // done() is read on this thread and must not block. Not from loop context, and never while
  // the loop is being destroyed.
  bool drive_until(const std::function<bool()>& done,
                   std::optional<std::chrono::steady_clock::time_point> spin_until,
                   std::optional<std::chrono::steady_clock::time_point> end = std::nullopt);

  // drive_until, with `first()` run on this thread as the loop's next work, after the tasks
  // already queued: a blocking call starts its operation here instead of posting it, and its
  // completion can live on its stack, since the caller holds the loop until done() or stop().
  // nullopt, having run nothing, when the loop cannot be taken at once (another thread runs its
  // work) or is stopping: then post the work instead. Like a task, `first` must not throw.
  template <typename F>
  std::optional<bool> drive_first(F& first, const std::function<bool()>& done,
                                  std::optional<std::chrono::steady_clock::time_point> spin_until) {
    return drive_first(FirstWork{[](void* f) { (*static_cast<F*>(f))(); }, &first}, done,
                       spin_until);
  }

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
    bool quiet = false;    // set_quiet
    bool writing = false;  // its events include EPOLLOUT: bytes wait for room to be written
  };
  void set_writing(Watch& w, std::uint32_t events);
  // Marks the calling thread as the loop context while it holds drive_.
  class Owner;
  void run();
  void dispatch(const std::array<epoll_event, 64>& events, int n);
  void sleep_until_woken();  // the loop's thread, without drive_: epoll_wait on park_
  void arm_if_earlier();     // under mu_: the timerfd for the earliest deadline, if it is earlier
  // Under mu_: epoll_ back into park_ once no caller drives and the linger is over (or work waits).
  void reattach_after_drivers();
  void arm_linger(Duration left);  // under mu_: linger_fd_ fires in `left`
  // Under mu_: the loop's thread sleeps while callers drive it (or it lingers for them), even
  // when busy polling: it could run nothing meanwhile (the driver holds drive_), and spinning
  // beside the driver it would take the driver's core where cores are shared, and the loop's
  // mutex from it on every look where they are not. Posts then wake it as they would without
  // busy polling.
  bool parks_while_driven() const { return detached_; }
  // Polls the watched descriptors without sleeping for up to poll_before_sleep(), or until an
  // event, a post or stop: epoll_wait's result (0: nothing came). `polled` says whether the pollers
  // found work meanwhile.
  int poll_briefly(std::array<epoll_event, 64>& events, bool& polled);
  void post_task(Task task, bool driver_follows);
  void wake();         // the loop's thread
  void wake_driver();  // a driver asleep in epoll_wait on epoll_
  void arm_timer(TimePoint deadline);
  // Tasks, then the timers due at `t` (a turn's one clock reading: each costs tens of
  // nanoseconds, more in a VM, and a driver's idle turn would otherwise read it three times);
  // true if it ran anything. Called by whichever thread holds drive_.
  bool run_ready_work(TimePoint t);
  bool run_ready_work() { return run_ready_work(now()); }
  TimePoint since_epoch(std::chrono::steady_clock::time_point t) const {
    return TimePoint(std::chrono::duration_cast<Duration>(t - epoch_));
  }
  // The first work of a drive_first: a plain function and its argument (no std::function, whose
  // closure would be allocated).
  struct FirstWork {
    void (*run)(void*) = nullptr;
    void* arg = nullptr;
  };
  std::optional<bool> drive_first(FirstWork first, const std::function<bool()>& done,
                                  std::optional<std::chrono::steady_clock::time_point> spin_until);
  // drive_until's body. `held`: drive_ is taken already (drive_first), and `first` runs in the
  // first turn, after the tasks queued.
  bool drive(const std::function<bool()>& done,
             std::optional<std::chrono::steady_clock::time_point> spin_until,
             std::optional<std::chrono::steady_clock::time_point> end,
             std::unique_lock<std::mutex> held, FirstWork first);
  bool run_pollers();  // true if any poller found work
  bool arm_pollers();  // false: a poller has work, do not sleep
  void disarm_pollers();

  const std::chrono::steady_clock::time_point epoch_;
  Fd epoll_;    // the watched fds and timer_fd_: what the loop's work waits on
  Fd park_;     // what the loop's thread sleeps on: wake_fd_, and epoll_ while no caller drives
  Fd wake_fd_;  // eventfd in park_: post() from other threads, stop()
  Fd driver_wake_fd_;  // eventfd in epoll_: the same for a driver asleep there
  Fd timer_fd_;        // timerfd: the earliest timer deadline
  Fd linger_fd_;       // timerfd in park_: driver_linger_ after the last driver left
  // Held by whichever thread runs the loop's work (the loop's own or a driving caller); owner_
  // names it. Taken before mu_, never the other way round.
  std::mutex drive_;
  std::atomic<std::thread::id> owner_{};
  mutable std::mutex mu_;
  std::deque<Task> tasks_;
  // Under mu_: every task in tasks_ was posted for a driver (post_for_driver), whose caller runs
  // it: a lingering loop is not taken back for them before the linger ends.
  bool only_driver_tasks_ = false;
  // Under drive_: run_ready_work's batch, kept so that a turn allocates nothing (a std::deque
  // allocates as it is made, and clear() keeps its first block: tasks_ stays allocated too).
  std::vector<Task> spare_batch_;
  TimerQueue timers_;
  // What a turn reads before it takes mu_, so that a driver's idle turn takes no lock: whether
  // tasks_ holds any (set and cleared under mu_), and timers_.next_deadline() (kept under mu_
  // whenever timers_ changes). A post or timer that a turn misses by reading them a moment too
  // early is seen by the next turn; the decision to sleep reads tasks_ and timers_ under mu_.
  std::atomic<bool> queued_{false};
  std::atomic<Duration::rep> next_due_{TimePoint::max().time_since_epoch().count()};
  void timers_changed() {  // under mu_
    next_due_.store(timers_.next_deadline().time_since_epoch().count(), std::memory_order_relaxed);
  }
  std::atomic<bool> stopping_{false};  // set under mu_, read anywhere
  std::atomic<bool> busy_poll_{false};
  std::atomic<bool> dedicated_core_{false};
  bool polling_ = false;  // under mu_: the loop is in poll_briefly
  // Under mu_: callers in drive_until; epoll_ is out of park_ (detached_) while there are any,
  // and until linger_until_ (driver_linger_ after the last left) or until work is queued.
  int drivers_ = 0;
  bool detached_ = false;
  TimePoint linger_until_{};
  bool linger_armed_ = false;  // linger_fd_ is set and has not fired, at linger_fires_
  TimePoint linger_fires_{};
  bool driver_asleep_ = false;  // a driver past its spin sleeps in epoll_wait on epoll_
  bool hand_back_ = false;      // a caller gave up driving unfinished, or bytes wait to be written:
                                // the last driver leaves no linger
  // Long enough that its timer seldom fires while callers drive back to back: each time it does,
  // the loop's thread wakes for nothing, which costs a large allreduce dearly (docs/performance.md
  // has the measurement). Posts from other callers and timers due sooner end it early; a peer's
  // unsolicited message (a ping, a p2p request) may wait for it.
  static constexpr Duration kDriverLinger = std::chrono::milliseconds(2);
  Duration driver_linger_ = kDriverLinger;  // under mu_: set_driver_linger
  static constexpr auto kDescriptorLook = std::chrono::microseconds(20);
  std::atomic<Duration::rep> poll_before_sleep_{kPollBeforeSleep.count()};
  std::atomic<Duration::rep> driver_poll_before_sleep_{kPollBeforeSleep.count()};
  TimePoint armed_ = TimePoint::max();
  // Loop context only.
  std::unordered_map<WatchId, Watch> watches_;
  WatchId next_watch_ = 8;  // below: the loop's own tokens (real/epoll_loop.cc)
  int loud_watches_ = 0;    // watches not set_quiet
  // Watches waiting for room to write. Written in loop context, read by a leaving driver: while
  // any waits, the last driver hands the loop back at once instead of lingering, since the bytes
  // a peer waits for would otherwise sit unwritten until the linger ends.
  std::atomic<int> writing_watches_{0};
  // A spinning driver's next look at quiet descriptors (drive_until). Loop context only.
  std::chrono::steady_clock::time_point next_look_{};
  std::vector<Poller*> pollers_;  // removed ones are null until the next turn compacts them
  std::thread thread_;            // last: starts after everything above exists
};

}  // namespace kf
