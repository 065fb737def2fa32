#include "real/epoll_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>
#include <stdexcept>
#include <system_error>

namespace kf {
namespace {

constexpr std::uint64_t kWakeToken = 0;
constexpr std::uint64_t kTimerToken = 1;

[[noreturn]] void throw_errno(const char* what) {
  throw std::system_error(errno, std::generic_category(), what);
}

}  // namespace

EpollLoop::EpollLoop()
    : epoch_(std::chrono::steady_clock::now()),
      epoll_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      timer_fd_(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK)) {
  if (!epoll_ || !wake_fd_ || !timer_fd_) throw_errno("EpollLoop: epoll/eventfd/timerfd");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeToken;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev) != 0) throw_errno("epoll_ctl");
  ev.data.u64 = kTimerToken;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, timer_fd_.get(), &ev) != 0) throw_errno("epoll_ctl");
  thread_ = std::thread([this] { run(); });
}

EpollLoop::~EpollLoop() {
  stop();
  if (thread_.joinable()) thread_.join();
}

TimePoint EpollLoop::now() const {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - epoch_));
}

void EpollLoop::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(wake_fd_.get(), &one, sizeof one);
}

void EpollLoop::post(Task task) {
  bool was_empty;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    was_empty = tasks_.empty() && !polling_;
    tasks_.push_back(std::move(task));
  }
  // The loop drains every task before it sleeps, so only the first of a burst needs a wake-up.
  if (was_empty && !busy_poll() && !in_loop_thread()) wake();
}

Executor::TimerId EpollLoop::post_after(Duration delay, Task task) {
  TimerId id;
  bool earliest;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return 0;  // never fires; cancel(0) is harmless
    const TimePoint deadline = now() + delay;
    id = timers_.add(deadline, std::move(task));
    earliest = deadline < armed_ && !polling_;  // a polling loop re-arms before it sleeps
  }
  // The loop re-arms the timerfd before it sleeps; a busy loop looks at the timers every turn.
  if (earliest && !busy_poll() && !in_loop_thread()) wake();
  return id;
}

void EpollLoop::cancel(TimerId id) {
  std::lock_guard lock(mu_);
  timers_.cancel(id);
}

EpollLoop::WatchId EpollLoop::watch(int fd, std::uint32_t events, IoCallback callback) {
  const WatchId id = next_watch_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl ADD");
  watches_.emplace(id, Watch{fd, std::make_shared<IoCallback>(std::move(callback))});
  return id;
}

void EpollLoop::modify(WatchId id, std::uint32_t events) {
  const auto it = watches_.find(id);
  if (it == watches_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, it->second.fd, &ev);
}

void EpollLoop::unwatch(WatchId id) {
  const auto it = watches_.find(id);
  if (it == watches_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.fd, nullptr);
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

bool EpollLoop::run_ready_work() {
  std::deque<Task> batch;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    batch.swap(tasks_);
  }
  bool ran = !batch.empty();
  for (auto& task : batch) {
    {
      std::lock_guard check(mu_);
      if (stopping_) return false;
    }
    task();
    task = nullptr;
  }
  // Due timers one at a time: a timer cancelled by the work before it (say, by the destructor
  // of the object it belongs to) must not fire.
  const TimePoint t = now();
  for (;;) {
    std::optional<Task> due;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return false;
      due = timers_.pop_due(t);
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
  const auto until = std::chrono::steady_clock::now() + kPollBeforeSleep;
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
      if (!tasks_.empty() || stopping_) break;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::yield();
  }
  std::lock_guard lock(mu_);
  polling_ = false;  // the queue is read again before any sleep: no post is left behind
  return n;
}

void EpollLoop::run() {
  std::array<epoll_event, 64> events;
  bool spun = false;  // polled since the last work: the next wait sleeps
  for (;;) {
    while (run_ready_work())
      spun = false;
    // Once a turn, then the descriptors get their turn too: a peer that keeps its ring full
    // must not starve the sockets and the other peers.
    const bool polled = run_pollers();
    if (polled) spun = false;
    TimePoint next;
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
      next = timers_.next_deadline();
      const bool busy = !tasks_.empty();
      // Re-armed only for an earlier deadline: a timerfd armed too early wakes the loop once for
      // nothing (then it re-arms), which is cheaper than a timerfd_settime for every operation
      // whose deadline is set and cancelled (each collective's timeout) before it fires.
      if (next < armed_) {
        armed_ = next;
        arm_timer(next);
      }
      if (busy) continue;
    }
    int n;
    if (polled || busy_poll()) {
      n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), 0);
      // Nothing ready: let another thread of this core run before looking again (a no-op on a
      // core of its own, and what keeps an oversubscribed host from stalling).
      if (n == 0 && !polled) std::this_thread::yield();
    } else if (!spun) {
      // Idle only now: poll for a moment before sleeping, as the next message or post of a run
      // of small collectives usually comes within it. Afterwards the loop goes round once more
      // (a timer posted meanwhile is armed there), then sleeps.
      bool polled_meanwhile = false;
      n = poll_briefly(events, polled_meanwhile);
      spun = n == 0 && !polled_meanwhile;
    } else if (!arm_pollers()) {
      disarm_pollers();  // a ring filled meanwhile: round again instead of sleeping
      spun = false;
      continue;
    } else {
      n = ::epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), -1);
      disarm_pollers();
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("epoll_wait");
    }
    if (n > 0) spun = false;
    for (int i = 0; i < n; ++i) {
      const std::uint64_t token = events[static_cast<std::size_t>(i)].data.u64;
      if (token == kWakeToken) {
        std::uint64_t count;
        [[maybe_unused]] const auto r = ::read(wake_fd_.get(), &count, sizeof count);
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
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
  }
  std::unique_lock lock(mu_);
  auto dropped_tasks = std::move(tasks_);
  auto dropped_timers = timers_.take();
  lock.unlock();
}

}  // namespace kf
