#include "real/epoll_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <system_error>

namespace kf {
namespace {

constexpr std::uint64_t kWakeToken = 0;        // in park_
constexpr std::uint64_t kTimerToken = 1;       // in epoll_
constexpr std::uint64_t kWorkToken = 2;        // epoll_ itself, in park_
constexpr std::uint64_t kLingerToken = 3;      // in park_
constexpr std::uint64_t kDriverWakeToken = 4;  // in epoll_
static_assert(kDriverWakeToken < 8, "watch ids start above the loop's own tokens (next_watch_)");

// epoll_wait's timeout for a deadline on the loop's clock: whole milliseconds, rounded up (a
// timer runs late by less than one, never early), -1 for none.
int ms_until_deadline(TimePoint deadline, TimePoint now) {
  if (deadline == TimePoint::max()) return -1;
  if (deadline <= now) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return static_cast<int>(std::min<std::int64_t>(ms, 1'000'000));
}

[[noreturn]] void throw_errno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// A driver's turn reading, lent to the first now() of the drive_first work that follows it when
// nothing ran between the two (an operation's deadline, read tens of nanoseconds after the turn's
// own reading). Taken once, by that loop, on this thread: any later now() reads the clock, so a
// long start cannot leave a stale reading behind.
thread_local const EpollLoop* t_lent_by = nullptr;
thread_local TimePoint t_lent_reading;

}  // namespace

EpollLoop::EpollLoop()
    : epoch_(std::chrono::steady_clock::now()),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      park_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      driver_wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      timer_fd_(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)),
      linger_fd_(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) {
  if (!epoll_ || !park_ || !wake_fd_ || !driver_wake_fd_ || !timer_fd_ || !linger_fd_)
    throw_errno("EpollLoop: epoll/eventfd/timerfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kTimerToken;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, timer_fd_.get(), &ev) != 0) throw_errno("epoll_ctl");
  ev.data.u64 = kDriverWakeToken;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, driver_wake_fd_.get(), &ev) != 0)
    throw_errno("epoll_ctl");
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(park_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev) != 0) throw_errno("epoll_ctl");
  ev.data.u64 = kLingerToken;
  if (::epoll_ctl(park_.get(), EPOLL_CTL_ADD, linger_fd_.get(), &ev) != 0) throw_errno("epoll_ctl");
  ev.data.u64 = kWorkToken;
  if (::epoll_ctl(park_.get(), EPOLL_CTL_ADD, epoll_.get(), &ev) != 0) throw_errno("epoll_ctl");
  thread_ = std::thread([this] { run(); });
}

EpollLoop::~EpollLoop() {
  stop();
  if (thread_.joinable()) thread_.join();
}

TimePoint EpollLoop::now() const {
  if (t_lent_by == this) {
    t_lent_by = nullptr;
    return t_lent_reading;
  }
  return since_epoch(std::chrono::steady_clock::now());
}

void EpollLoop::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_.get(), &one, sizeof one);
}

void EpollLoop::wake_driver() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(driver_wake_fd_.get(), &one, sizeof one);
}

void EpollLoop::post(Task task) {
  post_task(std::move(task), false);
}

void EpollLoop::post_for_driver(Task task) {
  post_task(std::move(task), true);
}

void EpollLoop::post_task(Task task, bool driver_follows) {
  bool wake_loop = false, wake_sleeping_driver = false, spinning;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    // The loop drains every task before it sleeps, so only the first of a burst needs a wake-up,
    // and a polling loop or a spinning driver needs none. A loop whose last driver left moments
    // ago (detached_, lingering) is woken too, unless the poster drives next and runs it itself.
    if (tasks_.empty() && !polling_) {
      wake_loop = drivers_ == 0 && (!detached_ || !driver_follows);
      wake_sleeping_driver = driver_asleep_;
    }
    only_driver_tasks_ = (tasks_.empty() || only_driver_tasks_) && driver_follows;
    tasks_.push_back(std::move(task));
    queued_.store(true, std::memory_order_relaxed);
    spinning = busy_poll() && !parks_while_driven();
  }
  if (spinning || in_loop_thread()) return;
  if (wake_loop) wake();
  if (wake_sleeping_driver) wake_driver();
}

Executor::TimerId EpollLoop::post_after(Duration delay, Task task) {
  return post_at(now() + delay, std::move(task));
}

Executor::TimerId EpollLoop::post_at(TimePoint deadline, Task task) {
  TimerId id;
  bool wake_loop = false, wake_sleeping_driver = false, spinning;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return 0;  // never fires; cancel(0) is harmless
    id = timers_.add(deadline, std::move(task));
    timers_changed();
    // The loop re-arms the timerfd before it sleeps (a polling one too), and so does the last
    // driver as it leaves; a sleeping driver computes its timeout from the deadlines, and a
    // lingering loop is woken only for a deadline before the linger's end.
    if (deadline < armed_ && !polling_) {
      wake_loop = drivers_ == 0 && (!detached_ || deadline < linger_until_);
      wake_sleeping_driver = driver_asleep_;
    }
    spinning = busy_poll() && !parks_while_driven();
  }
  if (spinning || in_loop_thread()) return id;
  if (wake_loop) wake();
  if (wake_sleeping_driver) wake_driver();
  return id;
}

void EpollLoop::cancel(TimerId id) {
  std::lock_guard lock(mu_);
  timers_.cancel(id);
  timers_changed();
}

EpollLoop::WatchId EpollLoop::watch(int fd, std::uint32_t events, IoCallback callback) {
  const WatchId id = next_watch_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl ADD");
  auto& w = watches_.emplace(id, Watch{fd, std::make_shared<IoCallback>(std::move(callback))})
                .first->second;
  set_writing(w, events);
  ++loud_watches_;
  return id;
}

void EpollLoop::set_writing(Watch& w, std::uint32_t events) {
  const bool writing = (events & EPOLLOUT) != 0;
  if (w.writing == writing) return;
  w.writing = writing;
  writing_watches_.fetch_add(writing ? 1 : -1, std::memory_order_relaxed);
}

void EpollLoop::set_quiet(WatchId id, bool quiet) {
  const auto it = watches_.find(id);
  if (it == watches_.end() || it->second.quiet == quiet) return;
  it->second.quiet = quiet;
  loud_watches_ += quiet ? -1 : 1;
}

void EpollLoop::modify(WatchId id, std::uint32_t events) {
  const auto it = watches_.find(id);
  if (it == watches_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, it->second.fd, &ev);
  set_writing(it->second, events);
}

void EpollLoop::unwatch(WatchId id) {
  const auto it = watches_.find(id);
  if (it == watches_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd, nullptr);
  if (!it->second.quiet) --loud_watches_;
  set_writing(it->second, 0);
  watches_.erase(it);
}

void EpollLoop::add_poller(Poller* poller) {
  pollers_.push_back(poller);
}

void EpollLoop::remove_poller(Poller* poller) {
  std::replace(pollers_.begin(), pollers_.end(), poller, static_cast<Poller*>(nullptr));
}

bool EpollLoop::run_pollers() {
  bool ran = false;
  // By index: a poller may add or remove pollers while it runs.
  for (std::size_t i = 0; i < pollers_.size(); ++i) {
    if (pollers_[i] != nullptr && pollers_[i]->poll()) ran = true;
  }
  std::erase(pollers_, nullptr);
  return ran;
}

bool EpollLoop::arm_pollers() {
  bool may_sleep = true;
  for (Poller* p : pollers_)
    if (p != nullptr && !p->arm()) may_sleep = false;
  return may_sleep;
}

void EpollLoop::disarm_pollers() {
  for (Poller* p : pollers_)
    if (p != nullptr) p->disarm();
}

void EpollLoop::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake();
  wake_driver();
}

void EpollLoop::arm_timer(TimePoint deadline) {
  itimerspec spec{};
  if (deadline != TimePoint::max()) {
    auto left = deadline - now();
    if (left < Duration(1000)) left = Duration(1000);  // zero would disarm it
    spec.it_value.tv_sec = static_cast<time_t>(left.count() / 1'000'000'000);
    spec.it_value.tv_nsec = static_cast<long>(left.count() % 1'000'000'000);
  }
  ::timerfd_settime(timer_fd_.get(), 0, &spec, nullptr);
}

bool EpollLoop::run_ready_work(TimePoint t) {
  if (stopping_.load(std::memory_order_acquire)) return false;
  bool ran = false;
  if (queued_.load(std::memory_order_acquire)) {
    std::vector<Task> batch = std::move(spare_batch_);  // its capacity, no allocation
    {
      std::lock_guard lock(mu_);
      batch.assign(std::make_move_iterator(tasks_.begin()), std::make_move_iterator(tasks_.end()));
      tasks_.clear();
      queued_.store(false, std::memory_order_relaxed);
    }
    ran = !batch.empty();
    for (auto& task : batch) {
      if (stopping_.load(std::memory_order_acquire)) return false;
      task();
      task = nullptr;
    }
    batch.clear();
    spare_batch_ = std::move(batch);
  }
  // Due timers one at a time: a timer cancelled by the work before it (say, by the destructor
  // of the object it belongs to) must not fire.
  while (t.time_since_epoch().count() >= next_due_.load(std::memory_order_acquire)) {
    std::optional<Task> due;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return false;
      due = timers_.pop_due(t);
      timers_changed();
    }
    if (!due) break;
    ran = true;
    (*due)();
  }
  return ran;
}

int EpollLoop::poll_briefly(std::array<epoll_event, 64>& events, bool& polled) {
  polled = false;
  {
    std::lock_guard lock(mu_);
    polling_ = true;  // posts from now on need no wake-up: the loop looks at the queue
  }
  const auto until = std::chrono::steady_clock::now() + poll_before_sleep();
  int n = 0;
  for (;;) {
    n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), 0);
    if (n != 0) break;
    if (run_pollers()) {
      polled = true;
      break;
    }
    {
      std::lock_guard lock(mu_);
      if (!tasks_.empty() || stopping_ || drivers_ > 0) break;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::yield();
  }
  std::lock_guard lock(mu_);
  polling_ = false;  // the queue is read again before any sleep: no post is left behind
  return n;
}

class EpollLoop::Owner {
 public:
  explicit Owner(EpollLoop& loop) : loop_(loop) {
    loop_.owner_.store(std::this_thread::get_id(), std::memory_order_release);
  }
  ~Owner() { loop_.owner_.store(std::thread::id(), std::memory_order_release); }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;

 private:
  EpollLoop& loop_;
};

void EpollLoop::arm_if_earlier() {
  // Re-armed only for an earlier deadline: a timerfd armed too early wakes the loop once for
  // nothing (then it re-arms), which is cheaper than a timerfd_settime for every operation whose
  // deadline is set and cancelled (each collective's timeout) before it fires.
  const TimePoint next = timers_.next_deadline();
  if (next < armed_) {
    armed_ = next;
    arm_timer(next);
  }
}

void EpollLoop::dispatch(const std::array<epoll_event, 64>& events, int n) {
  for (int i = 0; i < n; ++i) {
    const std::uint64_t token = events[static_cast<std::size_t>(i)].data.u64;
    if (token == kDriverWakeToken) {
      std::uint64_t count;
      [[maybe_unused]] const auto r = ::read(driver_wake_fd_.get(), &count, sizeof count);
      continue;
    }
    if (token == kTimerToken) {
      std::uint64_t count;
      [[maybe_unused]] const auto r = ::read(timer_fd_.get(), &count, sizeof count);
      std::lock_guard lock(mu_);
      armed_ = TimePoint::max();  // fired: re-arm for whatever is next
      continue;
    }
    const auto it = watches_.find(token);
    if (it == watches_.end()) continue;   // unwatched earlier in this batch
    auto callback = it->second.callback;  // survives an unwatch from inside the callback
    (*callback)(events[static_cast<std::size_t>(i)].events);
    if (stopping_.load(std::memory_order_acquire)) break;
  }
}

void EpollLoop::sleep_until_woken() {
  // Woken by a post or stop (wake_fd_), or by epoll_'s fds and timer while no caller drives. The
  // events themselves are taken afterwards from epoll_, under drive_: a driver may have taken
  // them meanwhile, so what woke us may be gone.
  std::array<epoll_event, 2> events;
  int n;
  do {
    n = ::epoll_wait(park_.get(), events.data(), static_cast<int>(events.size()), -1);
  } while (n < 0 && errno == EINTR);
  if (n < 0) throw_errno("epoll_wait");
  for (int i = 0; i < n; ++i) {
    const std::uint64_t token = events[static_cast<std::size_t>(i)].data.u64;
    std::uint64_t count;
    if (token == kWakeToken) {
      [[maybe_unused]] const auto r = ::read(wake_fd_.get(), &count, sizeof count);
    } else if (token == kLingerToken) {  // the linger is over: reattach_after_drivers sees it
      [[maybe_unused]] const auto r = ::read(linger_fd_.get(), &count, sizeof count);
      std::lock_guard lock(mu_);
      linger_armed_ = false;
    }
  }
}

void EpollLoop::set_driver_linger(Duration linger) {
  std::lock_guard lock(mu_);
  driver_linger_ = linger;
}

void EpollLoop::arm_linger(Duration left) {
  left = std::max(left, Duration(1000));  // zero would disarm it
  linger_fires_ = now() + left;
  itimerspec spec{};
  spec.it_value.tv_sec = static_cast<time_t>(left.count() / 1'000'000'000);
  spec.it_value.tv_nsec = static_cast<long>(left.count() % 1'000'000'000);
  ::timerfd_settime(linger_fd_.get(), 0, &spec, nullptr);
  linger_armed_ = true;
}

void EpollLoop::reattach_after_drivers() {
  if (!detached_ || drivers_ > 0) return;
  const TimePoint t = now();
  // The linger ends early for work: a task (not one a caller posted to run it next), or a timer
  // due before it.
  const TimePoint end = std::min(linger_until_, timers_.next_deadline());
  if (t < end && (tasks_.empty() || only_driver_tasks_)) {
    // Drivers came and went since the timer was set (it fired early), or a timer came: wait
    // out the rest.
    if (!linger_armed_ || end < linger_fires_) arm_linger(end - t);
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWorkToken;
  ::epoll_ctl(park_.get(), EPOLL_CTL_ADD, epoll_.get(), &ev);
  detached_ = false;
}

void EpollLoop::run() {
  std::array<epoll_event, 64> events;
  bool spun = false;  // polled since the last work: the next wait sleeps
  for (;;) {
    bool driven;
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      reattach_after_drivers();
      // A caller runs the work, or the last one left moments ago: out of their way.
      driven = detached_;
    }
    if (driven) {
      sleep_until_woken();
      spun = false;
      continue;
    }
    std::unique_lock drive(drive_);
    std::optional<Owner> owner(std::in_place, *this);
    while (run_ready_work())
      spun = false;
    disarm_pollers();  // armed before the last sleep, if it slept
    // Once a turn, then the descriptors get their turn too: a peer that keeps its ring full
    // must not starve the sockets and the other peers.
    const bool polled = run_pollers();
    if (polled) spun = false;
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      if (drivers_ > 0) continue;
      arm_if_earlier();
      if (!tasks_.empty()) continue;
    }
    if (spun && !busy_poll()) {
      // Idle after a brief poll: sleep, without drive_ so that a caller may drive meanwhile. A
      // post, a timer or a message that comes after the look above wakes it; the rings are
      // armed first, under drive_ (a ring that filled meanwhile: round again).
      if (!arm_pollers()) {
        disarm_pollers();
        spun = false;
        continue;
      }
      owner.reset();
      drive.unlock();
      sleep_until_woken();
      spun = false;
      continue;
    }
    int n;
    if (polled || busy_poll()) {
      n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), 0);
      // Nothing ready: let another thread of this core run before looking again (a no-op on a
      // core of its own, and what keeps an oversubscribed host from stalling).
      if (n == 0 && !polled) std::this_thread::yield();
    } else {
      // Idle only now: poll for a moment before sleeping, as the next message or post of a run
      // of small collectives usually comes within it. Afterwards the loop goes round once more
      // (a timer posted meanwhile is armed there), then sleeps.
      bool polled_meanwhile = false;
      n = poll_briefly(events, polled_meanwhile);
      spun = n == 0 && !polled_meanwhile;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("epoll_wait");
    }
    if (n > 0) spun = false;
    dispatch(events, n);
  }
  std::unique_lock lock(mu_);
  auto dropped_tasks = std::move(tasks_);
  tasks_.clear();
  queued_.store(false, std::memory_order_relaxed);
  auto dropped_timers = timers_.take();
  timers_changed();
  lock.unlock();
}

bool EpollLoop::drive_until(const std::function<bool()>& done,
                            std::optional<std::chrono::steady_clock::time_point> spin_until,
                            std::optional<std::chrono::steady_clock::time_point> end) {
  if (done()) return true;
  return drive(done, spin_until, end, {}, {});
}

std::optional<bool> EpollLoop::drive_first(
    FirstWork first, const std::function<bool()>& done,
    std::optional<std::chrono::steady_clock::time_point> spin_until) {
  std::unique_lock held(drive_, std::try_to_lock);  // drive_ before mu_, as everywhere
  if (!held.owns_lock() || stopping_.load(std::memory_order_acquire)) return std::nullopt;
  return drive(done, spin_until, std::nullopt, std::move(held), first);
}

bool EpollLoop::drive(const std::function<bool()>& done,
                      std::optional<std::chrono::steady_clock::time_point> spin_until,
                      std::optional<std::chrono::steady_clock::time_point> end,
                      std::unique_lock<std::mutex> held, FirstWork first) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && first.run == nullptr) return false;
    // The first driver takes epoll_ out of what the loop's thread sleeps on (unless the last one
    // left it out, lingering): the messages this caller serves must not wake that thread too.
    if (drivers_++ == 0 && !detached_) {
      ::epoll_ctl(park_.get(), EPOLL_CTL_DEL, epoll_.get(), nullptr);
      detached_ = true;
    }
  }
  bool finished = false;
  bool ended = false;  // at `end`: the caller stops waiting
  // The last turn's clock reading, for the linger after the drive: a reading costs tens of
  // nanoseconds, and a linger that starts a turn's work early (or a long reduction's) ends only
  // that much sooner.
  std::optional<TimePoint> last_reading;
  std::array<epoll_event, 64> events;
  for (;;) {
    if (first.run == nullptr && (finished = done())) break;
    std::unique_lock drive = held ? std::move(held) : std::unique_lock(drive_, std::try_to_lock);
    if (!drive.owns_lock()) {  // the loop's thread (it leaves soon) or another caller drives
      const auto t = std::chrono::steady_clock::now();
      if ((spin_until && t >= *spin_until) || (end && t >= *end)) {
        ended = end && t >= *end;
        break;
      }
      std::this_thread::yield();
      continue;
    }
    const Owner owner(*this);
    disarm_pollers();  // the loop's thread may have armed them before it slept
    // A turn reads the clock once (each reading costs tens of nanoseconds, more in a VM, and a
    // spinning driver's turn is otherwise a few loads).
    std::optional<std::chrono::steady_clock::time_point> last_turn;
    bool worked_last_turn = false;
    while (!(finished = done())) {
      const auto turn = std::chrono::steady_clock::now();
      last_turn = turn;
      // Work keeps the driver spinning, as it keeps the loop's thread polling (poll_briefly): a
      // large collective's next message comes within a step's time, not the whole operation's.
      // The spin runs from this reading, the first after the work (which may have taken longer
      // than the spin).
      if (worked_last_turn && spin_until) spin_until = turn + driver_poll_before_sleep();
      if (end && turn >= *end) {
        ended = true;
        break;
      }
      bool worked = run_ready_work(since_epoch(turn));
      if (first.run != nullptr) {  // after what was queued before it, as a posted task would run
        const FirstWork work = std::exchange(first, {});
        if (!worked) {  // the turn's reading is still fresh: its first now() takes it
          t_lent_by = this;
          t_lent_reading = since_epoch(turn);
        }
        work.run(work.arg);
        t_lent_by = nullptr;
        worked = true;
      }
      const bool ran = run_pollers() || worked;
      worked_last_turn = ran;
      const bool quiet_spin = loud_watches_ == 0 && dedicated_core();
      int timeout = 0;
      if (stopping_.load(std::memory_order_acquire)) break;
      if (!ran && spin_until && turn >= *spin_until) {
        std::lock_guard lock(mu_);
        if (stopping_) break;
        // Past the spin: sleep in the loop's own wait, woken by a message, a post (driver_asleep_
        // makes posts write driver_wake_fd_, in epoll_) or the next timer's deadline.
        if (tasks_.empty()) {
          TimePoint wake_at = timers_.next_deadline();
          if (end) wake_at = std::min(wake_at, since_epoch(*end));
          timeout = ms_until_deadline(wake_at, since_epoch(turn));
          driver_asleep_ = true;
        }
      }
      // Asleep, the driver must be rung like the loop's thread: its rings armed first.
      if (timeout != 0 && !arm_pollers()) {
        disarm_pollers();
        std::lock_guard lock(mu_);
        driver_asleep_ = false;
        continue;
      }
      // Spinning on a core of its own with only quiet descriptors (peers' rings carry the
      // messages), the driver looks at them every kDescriptorLook: a look costs more than a
      // small message through a ring.
      if (timeout == 0 && quiet_spin) {
        if (turn < next_look_) continue;
        next_look_ = turn + kDescriptorLook;
      }
      const int n =
          ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), timeout);
      if (timeout != 0) {
        disarm_pollers();
        std::lock_guard lock(mu_);
        driver_asleep_ = false;
      }
      if (n > 0) {
        dispatch(events, n);
      } else if (!ran && timeout == 0 && !quiet_spin) {
        // Another worker of this core may be waiting for it. Over TCP the driver yields even on
        // a core of its own: a look costs a system call anyway, and a host shared in ways the
        // peer cannot see (namespaces, containers) or the kernel's network work may need it.
        std::this_thread::yield();
      }
    }
    // What the finished work posted last (an operation's clean-up) is cheaper to run here than
    // to wake the loop's thread for. Timers by the last turn's clock: one due since waits for
    // the next turn, on whichever thread.
    if (last_turn) last_reading = since_epoch(*last_turn);
    if (finished) run_ready_work(last_reading ? *last_reading : now());
    break;
  }
  std::lock_guard lock(mu_);
  if (!finished && !ended) hand_back_ = true;  // still waiting, without driving: no linger
  // Bytes that wait for room in a socket (a TCP peer's last chunk, say) would wait out the
  // linger too, and the peer with them: the loop's thread takes over now.
  if (writing_watches_.load(std::memory_order_relaxed) > 0) hand_back_ = true;
  if (--drivers_ == 0) {
    arm_if_earlier();
    if (!hand_back_) {
      // Back to the loop's thread after driver_linger_, unless a caller drives again by then: a
      // run of blocking collectives keeps their messages off the loop's thread even when a
      // peer's comes between two of them. Each leave pushes the end back; the timer, set for an
      // earlier end, fires early and is re-armed for the rest (reattach_after_drivers). A timer
      // due sooner (a full ring's retry, say) ends it early, and a task left queued (or posted
      // meanwhile by a call whose caller does not drive next) wakes the loop's thread at once.
      const TimePoint t = last_reading ? *last_reading : now();
      linger_until_ = std::min(t + driver_linger_, timers_.next_deadline());
      if (!linger_armed_ || linger_until_ < linger_fires_) arm_linger(linger_until_ - t);
      if ((!tasks_.empty() && !only_driver_tasks_) || stopping_) wake();
    } else {
      // A caller gave up driving and waits for its result: the loop's thread takes over now.
      hand_back_ = false;
      linger_until_ = now();
      wake();
    }
  }
  return finished;
}

}  // namespace kf
