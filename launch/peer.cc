#include "launch/peer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <limits>
#include <string_view>
#include <thread>

#include "launch/flags.h"
#include "launch/startup_report.h"
#include "real/cpu_cores.h"
#include "real/epoll_loop.h"
#include "real/shm_ring.h"
#include "runtime/chunking.h"
#include "runtime/collectives.h"
#include "runtime/units.h"
#include "topology/forest.h"

namespace kf {

namespace {
// Where the job spans hosts (TCP), or a host has more than two workers a core, a caller drives the
// loop (by default) only for blocking calls of at most this many bytes: there it takes less than
// half their time, while larger ones were as fast or faster on the loop's thread
// (docs/performance.md, "The caller drives its loop").
constexpr std::size_t kSmallDriveBytes = std::size_t{64} << 10;
constexpr std::size_t kUnknownBytes = std::numeric_limits<std::size_t>::max();
// A longer poll after work is a core spinning for nothing; a typo (200s for 200us) should fail.
constexpr Duration kMaxPollBeforeSleep = std::chrono::seconds(1);

// True on a thread while a blocking call starts its operation (Impl::launch): the call waits
// for it at once. t_blocking_bytes: how many bytes it moves (kUnknownBytes if not known).
thread_local bool t_blocking_call = false;
thread_local std::size_t t_blocking_bytes = 0;
// True on a thread while one of Peer's own blocking methods starts its operation: the call waits
// for its result without a limit (the Python binding's blocking calls wait in slices instead, to
// look for Ctrl-C between them), so it may run the operation to its end before it returns the
// handle (Impl::run_blocking).
thread_local bool t_waits_whole = false;

// Starts a call of `bytes` with `start` (which returns its Handle) and waits for it.
template <typename Start>
Status start_and_wait(std::size_t bytes, Start&& start) {
  Handle h;
  {
    const Peer::BlockingCall marked(bytes);  // also unmarked when start() throws
    struct WaitsWhole {
      WaitsWhole() { t_waits_whole = true; }
      ~WaitsWhole() { t_waits_whole = false; }
      WaitsWhole(const WaitsWhole&) = delete;
      WaitsWhole& operator=(const WaitsWhole&) = delete;
    } whole;
    h = start();
  }
  return h.wait();
}
}  // namespace

Peer::BlockingCall::BlockingCall(std::size_t bytes) {
  t_blocking_call = true;
  t_blocking_bytes = bytes;
}

Peer::BlockingCall::~BlockingCall() {
  t_blocking_call = false;
}

Status Handle::wait() const {
  if (!done_) return Status(ErrorCode::invalid_argument, "wait() on an empty kf::Handle");
  return *wait_until_done(std::nullopt);
}

std::optional<Status> Handle::wait_for(Duration limit) const {
  if (!done_) return Status(ErrorCode::invalid_argument, "wait_for() on an empty kf::Handle");
  return wait_until_done(limit);
}

std::optional<Status> Handle::wait_until_done(std::optional<Duration> limit) const {
  // ready() reads an atomic, and a caller that is not asleep costs the completing thread no
  // wake-up. Busy polling spins until done; otherwise a short spin first (a small collective
  // often completes within it), then sleep. With a loop to drive, the spin runs the loop's work
  // on this thread. A limit ends each of them.
  const Completion& done = *done_;
  if (done.ready()) return done.status();
  const auto start = std::chrono::steady_clock::now();
  const auto end = limit ? std::optional(start + *limit) : std::nullopt;
  const auto past = [&end] { return end && std::chrono::steady_clock::now() >= *end; };
  // As long as a driver polls after work: a wait that drives runs that poll, and one that does
  // not spins the default.
  auto spin_until =
      start + (loop_ != nullptr ? loop_->driver_poll_before_sleep() : EpollLoop::kPollBeforeSleep);
  if (end) spin_until = std::min(spin_until, *end);
  if (loop_ != nullptr && !loop_->in_loop_thread()) {
    // The limit ends the drive from the turn's own clock reading: a timer for it would wake the
    // loop's thread (no driver yet) on every wait of a caller that waits in slices.
    loop_->drive_until([&done] { return done.ready(); },
                       spin_ ? std::nullopt : std::optional(spin_until), end);
  }
  while (!done.ready()) {
    if (past() || (!spin_ && std::chrono::steady_clock::now() >= spin_until)) break;
    std::this_thread::yield();
  }
  if (!end) {
    done.wait();
  } else if (!done.wait_for(std::max(
                 Duration::zero(),
                 std::chrono::duration_cast<Duration>(*end - std::chrono::steady_clock::now())))) {
    return std::nullopt;
  }
  return done.status();
}

namespace {
// How long a worker whose operations failed for want of a peer waits for its orderly close.
constexpr Duration kCloseAfterFailure = std::chrono::seconds(1);
}  // namespace

struct Peer::Impl {
  PeerOptions options;
  EpollLoop loop;
  std::unique_ptr<RealMembership> membership;  // elastic workers; loop thread only
  std::unique_ptr<SocketTransport> fixed;      // the others; loop thread only
  std::unique_ptr<Engine> engine;              // loop thread only
  std::uint64_t serial = 0;                    // automatic names, caller side
  bool joining = false;
  // An operation failed for want of a peer (timeout, peer_lost): the close then waits briefly,
  // since a stopped or vanished peer never answers the bye. Loop thread only.
  bool peer_failed = false;
  StrategyName configured = StrategyName::automatic;  // at construction: what joiners start on
  // Waiting callers drive the loop: for every call (drives), or only for blocking calls of
  // fewer bytes than drive_below (0: none; drives implies all).
  std::atomic<bool> drives{false};
  std::atomic<std::size_t> drive_below{0};
  // transport.ring_lend_min_bytes and ring_part_lend_min_bytes as the user gave them (0:
  // fit_cores chooses).
  std::size_t ring_lend_min_given = 0;
  std::size_t ring_part_lend_min_given = 0;

  // Whether this worker has a core of its own in `cluster`, and what follows from it: how the
  // loop spins, and whether waiting callers drive it (PeerOptions::caller_drives: by default
  // every wait in a job on one host whose workers each have a core, where every peer is reached
  // through a shared-memory ring; every blocking call on one host with two workers a core at
  // most; elsewhere blocking calls of at most kSmallDriveBytes).
  void fit_cores(const ClusterSpec& cluster, int rank) {
    const int here = cluster.local_size(rank);
    const bool own_core = here <= options.engine.host_cores;
    const bool one_host = here == cluster.size();
    // More than two workers a core: a driver's yield goes round several idle drivers before it
    // reaches the one with bytes to move, and large collectives there were faster on the loops'
    // threads (docs/performance.md, "Blocking calls drive on shared cores").
    const bool crowded = here > 2 * options.engine.host_cores;
    loop.set_dedicated_core(own_core);
    const bool all = options.caller_drives.value_or(own_core && one_host);
    // A core of its own: poll longer before sleeping than a sleeping peer takes to wake
    // (EpollLoop::set_poll_before_sleep), on one host or across hosts, where a reply over TCP
    // often takes longer than the default too. Where workers share cores the loop's thread polls
    // briefly, as a longer poll would take the core from the others (and the compute beside
    // them), but a driver on one host, which waits anyway, polls as long as the other workers of
    // its core take to run their turn (it yields the core on each idle turn): a driver that
    // slept between a collective's steps would be woken for nearly every step.
    const Duration poll =
        own_core ? EpollLoop::kOwnCorePollBeforeSleep : EpollLoop::kPollBeforeSleep;
    loop.set_poll_before_sleep(options.poll_before_sleep.value_or(poll));
    loop.set_driver_poll_before_sleep(
        options.poll_before_sleep.value_or(one_host ? EpollLoop::kOwnCorePollBeforeSleep : poll));
    drives.store(all, std::memory_order_relaxed);
    // Unset and not every wait: every blocking call on one host (shared cores, not crowded),
    // else the small ones. An async call's wait leaves the work to the loop's thread there:
    // DDP's buckets were slower when their waits drove.
    const bool blocking = !options.caller_drives && !all;
    drive_below.store(all                                ? kUnknownBytes
                      : blocking && one_host && !crowded ? kUnknownBytes
                      : blocking                         ? kSmallDriveBytes + 1
                                                         : 0,
                      std::memory_order_relaxed);
    // Through a shared-memory ring, payloads up to the ring's size stream through it where every
    // worker has a core (the writer and the reader copy at once), up to half of it where they
    // share cores (then they take turns, and a large frame waits for the reader to make room).
    const std::size_t ring = options.transport.shm_ring_bytes;
    const std::size_t lend_from = ring_lend_min_given != 0 ? ring_lend_min_given
                                  : own_core               ? ring
                                                           : ring / 2;
    // With two workers a core, a ring collective's parts are lent from half the ring, with more
    // than two from a quarter: there the workers' turns are the bottleneck, and a part streamed
    // costs its writer a copy in (its reader folds it where it lies, RingSlice), where a lent one
    // costs the reader a read that pins the lender's pages (docs/performance.md, "A ring's parts
    // lent where workers take turns"). A tree's payloads stream up to half the ring too: lent,
    // each waits for its readers' acks, and a root reads or lends to several at once.
    const bool in_turns = here >= 2 * options.engine.host_cores;
    const std::size_t part_from = ring_part_lend_min_given != 0 ? ring_part_lend_min_given
                                  : crowded                     ? ring / 4
                                  : in_turns                    ? ring / 2
                                                                : 0;
    options.transport.ring_lend_min_bytes = lend_from;
    options.transport.ring_part_lend_min_bytes = part_from;
    if (options.elastic) {
      options.elastic->transport.ring_lend_min_bytes = lend_from;
      options.elastic->transport.ring_part_lend_min_bytes = part_from;
    }
    // Later calls (a resize) run on the loop's thread, where the transports live.
    if (SocketTransport* t = transport(); t != nullptr) {
      t->set_ring_lend_min_bytes(lend_from);
      t->set_ring_part_lend_min_bytes(part_from);
    }
  }

  bool drives_blocking_call(std::size_t bytes) const {
    return drives.load(std::memory_order_relaxed) ||
           bytes < drive_below.load(std::memory_order_relaxed);
  }

  mutable std::mutex config_mutex;
  WorkerConfig config;  // the current cluster and this worker's rank in it

  WorkerConfig current() const {
    std::lock_guard lock(config_mutex);
    return config;
  }
  SocketTransport* transport() const { return membership ? membership->current() : fixed.get(); }

  // Starts `start(engine, done)`, a call moving `bytes`, on the loop; the handle completes with
  // `done`'s status. `waits`: the caller waits for it at once (a blocking call), so when it
  // drives the loop it runs the start itself and the loop's thread need not wake for it. Where
  // every wait drives, an async call of at most kSmallDriveBytes is left for the next wait too,
  // as it is usually waited for at once (torch.distributed's calls are async calls waited for at
  // once), or for the loop's thread when the last driver's linger ends (kDriverLinger) if no
  // wait comes first; a larger one wakes the loop's thread, as its start should not wait (DDP's
  // buckets, a pipeline's overlap). Where only blocking calls drive (shared cores, hosts apart),
  // async calls do not: there a driver's linger holds back the messages the loop's
  // thread would have served meanwhile, and DDP with a barrier every step was slower when small
  // async calls drove (docs/performance.md, "From PyTorch").
  // `start` is held by the posted task as it is (one allocation, where a std::function of it
  // inside the task would be a second).
  template <typename Start>
  Handle launch(std::size_t bytes, Start start, bool waits = t_blocking_call) {
    const bool every_wait_drives = drives.load(std::memory_order_relaxed);
    const bool drive = every_wait_drives || (waits && drives_blocking_call(t_blocking_bytes));
    if (drive && waits && t_waits_whole && !loop.in_loop_thread()) {
      if (auto h = run_blocking(start)) return std::move(*h);
    }
    auto done = std::make_shared<Completion>();
    const bool small_async = !waits && bytes <= kSmallDriveBytes;
    Handle h(done, options.busy_poll, drive ? &loop : nullptr);
    auto task = [this, done, start = std::move(start)]() mutable {
      if (!engine) {
        done->set(Status(ErrorCode::cancelled, "peer is shutting down"));
        return;
      }
      start(*engine, [this, done](Status s) {
        if (s.code() == ErrorCode::timeout || s.code() == ErrorCode::peer_lost) peer_failed = true;
        done->set(std::move(s));
      });
    };
    if (drive && (waits || small_async)) {
      loop.post_for_driver(std::move(task));
    } else {
      loop.post(std::move(task));
    }
    return h;
  }

  // A blocking call whose wait drives, started and waited for on this thread while it holds the
  // loop (EpollLoop::drive_first): its start runs as the loop's next work, not as a posted task,
  // and its result lands on this stack, filled in place by the engine (a StatusSlot) where
  // another call's completion is posted (the caller holds the loop until it lands, or until the
  // loop stops, which completes every operation as the engine goes). No task, completion or
  // callback is allocated, and none is posted back. nullopt, having started nothing, when another
  // thread runs the loop now: launch then posts the start as for any call.
  template <typename Start>
  std::optional<Handle> run_blocking(Start& start) {
    struct Outcome {
      Status status;
      std::atomic<bool> done{false};  // set on the loop, which a stopping peer may hand back
    } outcome;
    auto first = [this, &outcome, &start] {
      const StatusSlot slot{&outcome.status, &outcome.done};  // the engine fills it in place
      if (!engine) {
        slot(Status(ErrorCode::cancelled, "peer is shutting down"));
        return;
      }
      start(*engine, DoneCallback(slot));
    };
    const auto spin_until =
        options.busy_poll
            ? std::nullopt
            : std::optional(std::chrono::steady_clock::now() + loop.driver_poll_before_sleep());
    if (!loop.drive_first(
            first, [&outcome] { return outcome.done.load(std::memory_order_acquire); },
            spin_until)) {
      return std::nullopt;
    }
    // Stopped before the result came: the engine's end completes the operation on the loop.
    while (!outcome.done.load(std::memory_order_acquire))
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    const ErrorCode code = outcome.status.code();
    if (code == ErrorCode::timeout || code == ErrorCode::peer_lost)
      loop.post([this] { peer_failed = true; });  // read on the loop, as launch's callback sets it
    // As launch would make it (Handle::drives() says the wait drove), already complete.
    if (outcome.status.ok()) return Handle(completed_ok(), options.busy_poll, &loop);
    auto done = std::make_shared<Completion>();
    done->set(std::move(outcome.status));
    return Handle(std::move(done), options.busy_poll, &loop);
  }

  // One completion, set once with success, for the handles of every call that succeeded before
  // it returned. It lives as long as the program, so the handles do not own it: a pointer without
  // a control block, whose copies count no references.
  static std::shared_ptr<const Completion> completed_ok() {
    static Completion ok;
    static const bool set = (ok.set(Status()), true);
    (void)set;
    return std::shared_ptr<const Completion>(std::shared_ptr<const Completion>(), &ok);
  }

  // The constructor's bounded wait for every peer to connect, reporting who is missing.
  void wait_for_peers();
  void report(const std::string& line) const;

  // Runs a resize protocol on the loop and switches to the cluster it agreed on.
  ResizeResult resize(const char* what,
                      std::function<void(Engine&, Membership&, ClusterCallback)> protocol);
  // On the loop: this worker's part of the agreed cluster `next`; `done` once settled.
  void adopt(ClusterSpec next, std::function<void(ResizeResult)> done);
};

Peer::Peer(WorkerConfig config, PeerOptions options, bool joining)
    : Peer(std::move(config), std::move(options)) {
  impl_->joining = joining;
}

Peer Peer::from_env(PeerOptions options) {
  const EnvMap env = current_environment();
  if (const auto it = env.find("KUNGFU_BUSY_POLL"); it != env.end()) {
    if (it->second != "0" && it->second != "1")
      throw std::invalid_argument(fmt::format("KUNGFU_BUSY_POLL={}: expected 0 or 1", it->second));
    options.busy_poll = it->second == "1";
  }
  if (const auto it = env.find("KUNGFU_CALLER_DRIVES"); it != env.end()) {
    if (it->second != "0" && it->second != "1")
      throw std::invalid_argument(
          fmt::format("KUNGFU_CALLER_DRIVES={}: expected 0 or 1", it->second));
    options.caller_drives = it->second == "1";
  }
  if (const auto it = env.find("KUNGFU_POLL_BEFORE_SLEEP");
      it != env.end() && !options.poll_before_sleep) {
    Duration poll;
    try {
      poll = parse_duration(it->second, UnitStyle::strict);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(
          fmt::format("KUNGFU_POLL_BEFORE_SLEEP={}: {}", it->second, e.what()));
    }
    if (poll > kMaxPollBeforeSleep)
      throw std::invalid_argument(
          fmt::format("KUNGFU_POLL_BEFORE_SLEEP={}: at most 1s", it->second));
    options.poll_before_sleep = poll;
  }
  if (const auto it = env.find("KUNGFU_TCP_DUPLEX"); it != env.end()) {
    if (it->second != "0" && it->second != "1")
      throw std::invalid_argument(fmt::format("KUNGFU_TCP_DUPLEX={}: expected 0 or 1", it->second));
    options.transport.tcp_duplex = it->second == "1";
  }
  if (const auto it = env.find("KUNGFU_AUTO_DOUBLING");
      it != env.end() && !options.auto_doubling_bytes) {
    try {
      options.auto_doubling_bytes = parse_size(it->second, UnitStyle::flag);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("KUNGFU_AUTO_DOUBLING={}: {}", it->second, e.what()));
    }
  }
  if (const auto it = env.find("KUNGFU_SHM_RING"); it != env.end()) {
    try {
      options.transport.shm_ring_bytes = parse_size(it->second, UnitStyle::flag);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("KUNGFU_SHM_RING={}: {}", it->second, e.what()));
    }
    const std::size_t n = options.transport.shm_ring_bytes;
    if (n != 0 && !ShmRing::valid_capacity(n))
      throw std::invalid_argument(fmt::format(
          "KUNGFU_SHM_RING={}: expected 0 (off) or a power of two from 4K to 64M", it->second));
  }
  if (const auto it = env.find("KUNGFU_LAND"); it != env.end()) {
    try {
      options.transport.land_min_bytes = parse_size(it->second, UnitStyle::flag);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("KUNGFU_LAND={}: {}", it->second, e.what()));
    }
  }
  WorkerConfig config = worker_config_from(env);
  if (options.transport.secret.empty()) {
    if (const auto it = env.find("KUNGFU_SECRET"); it != env.end())
      options.transport.secret = it->second;
  }
  if (const auto it = env.find("KUNGFU_CONNECT_TIMEOUT"); it != env.end()) {
    try {
      options.transport.connect_timeout = parse_flag_duration(it->second);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(
          fmt::format("KUNGFU_CONNECT_TIMEOUT={}: {}", it->second, e.what()));
    }
    if (options.transport.connect_timeout <= Duration::zero())
      throw std::invalid_argument(
          fmt::format("KUNGFU_CONNECT_TIMEOUT={}: must be above zero", it->second));
  }
  if (!options.elastic)
    options.elastic = elastic_membership_options(env, config, options.transport);
  const auto joining = env.find("KUNGFU_JOINING");
  return Peer(std::move(config), std::move(options),
              joining != env.end() && joining->second == "1");
}

Peer::Peer(WorkerConfig config, PeerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.config = std::move(config);
  p.options = std::move(options);
  if (p.options.transport.secret.empty()) {
    if (const char* s = std::getenv("KUNGFU_SECRET")) p.options.transport.secret = s;
  }
  if (p.config.strategy) p.options.engine.strategy = *p.config.strategy;
  p.configured = p.options.engine.strategy;
  if (p.options.poll_before_sleep && (*p.options.poll_before_sleep < Duration::zero() ||
                                      *p.options.poll_before_sleep > kMaxPollBeforeSleep))
    throw std::invalid_argument(
        fmt::format("PeerOptions::poll_before_sleep: {} us, expected 0 to 1s",
                    to_seconds(*p.options.poll_before_sleep) * 1e6));
  p.loop.set_busy_poll(p.options.busy_poll);  // no other thread has posted yet
  p.options.engine.auto_doubling_bytes = p.options.auto_doubling_bytes.value_or(
      p.options.busy_poll ? kBusyPollAutoDoublingBytes : p.options.engine.auto_doubling_bytes);
  // Every worker of a host counts the same cores, so all of them choose alike (AUTO).
  if (p.options.engine.host_cores == 0) p.options.engine.host_cores = usable_cores();
  p.ring_lend_min_given = p.options.transport.ring_lend_min_bytes;
  p.ring_part_lend_min_given = p.options.transport.ring_part_lend_min_bytes;
  p.fit_cores(p.config.cluster, p.config.rank);
  try {
    p.loop.call([&] {
      Transport* transport = nullptr;
      if (p.options.elastic) {
        p.membership = std::make_unique<RealMembership>(p.loop, *p.options.elastic);
        transport = &p.membership->transport(p.config.cluster, p.config.rank);  // starts it
      } else {
        p.fixed = std::make_unique<SocketTransport>(p.loop, p.config.cluster, p.config.rank,
                                                    p.options.transport);
        if (p.config.cluster.size() > 1) p.fixed->start();  // throws if the port is taken
        transport = p.fixed.get();
      }
      p.engine = std::make_unique<Engine>(p.config.cluster, p.config.rank, p.loop, *transport,
                                          p.options.engine);
    });
  } catch (...) {
    p.loop.call([&] {  // on its own thread, before the loop goes
      p.membership.reset();
      p.fixed.reset();
    });
    throw;
  }
  if (p.options.wait_for_peers && p.config.cluster.size() > 1) p.wait_for_peers();
}

void Peer::Impl::wait_for_peers() {
  // Bounded: after the connect timeout the transport reports the missing peers as lost. A peer
  // lost meanwhile ends the wait: the first collective then reports it.
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + options.transport.connect_timeout + std::chrono::seconds(1);
  const auto every = options.startup_report_every;
  auto next_report = start + every;
  const auto waited = [&start] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  };
  const auto missing = [this] {
    return loop.call([&] { return transport() ? transport()->unconnected() : std::vector<int>{}; });
  };
  while (!loop.call([&] { return transport() == nullptr || transport()->connecting_settled(); }) &&
         Clock::now() < deadline) {
    if (every > Duration::zero() && Clock::now() >= next_report) {
      next_report += every;
      if (const auto m = missing(); !m.empty())
        report(waiting_line(config.cluster, config.rank, m, waited()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // Peers lost before they ever connected (the connect timeout passed, or they refused us):
  // the list a stuck start-up needs.
  if (every > Duration::zero()) {
    if (const auto m = missing(); !m.empty())
      report(gave_up_line(config.cluster, config.rank, m, waited()));
  }
}

void Peer::Impl::report(const std::string& line) const {
  if (options.transport.log) {
    options.transport.log(line);
  } else {
    std::fprintf(stderr, "[kf] %s\n", line.c_str());
  }
}

Peer::Peer(Peer&&) noexcept = default;
Peer& Peer::operator=(Peer&&) noexcept = default;

Peer::~Peer() {
  if (!impl_) return;
  Impl& p = *impl_;
  p.loop.call([&] { p.engine.reset(); });
  std::promise<void> closed;
  auto closed_future = closed.get_future();
  const Duration limit = p.loop.call([&] {
    return p.peer_failed ? std::min<Duration>(p.options.shutdown_limit, kCloseAfterFailure)
                         : p.options.shutdown_limit;
  });
  p.loop.call([&] {
    if (p.membership) {
      if (p.peer_failed) p.membership->limit_close(limit);
      p.membership->leave([&closed] { closed.set_value(); });
    } else {
      p.fixed->shutdown(limit, [&closed] { closed.set_value(); });
    }
  });
  closed_future.wait_for(limit + std::chrono::seconds(1));
  p.loop.call([&] {
    p.membership.reset();
    p.fixed.reset();
  });
  p.loop.stop();
}

int Peer::rank() const {
  return impl_->current().rank;
}
int Peer::size() const {
  return impl_->current().cluster.size();
}
int Peer::local_rank() const {
  const WorkerConfig c = impl_->current();
  return c.cluster.local_rank(c.rank);
}
int Peer::local_size() const {
  const WorkerConfig c = impl_->current();
  return c.cluster.local_size(c.rank);
}
ClusterSpec Peer::cluster() const {
  return impl_->current().cluster;
}
WorkerConfig Peer::config() const {
  return impl_->current();
}
bool Peer::elastic() const {
  return impl_->options.elastic.has_value();
}
bool Peer::joining() const {
  return impl_->joining;
}

void Peer::set_strategy(StrategyName strategy) {
  Impl& p = *impl_;
  // Ahead of every operation posted after this call: the loop runs posts in order.
  p.loop.post([&p, strategy] {
    p.options.engine.strategy = strategy;  // for the engines of later cluster versions
    if (p.engine) p.engine->set_strategy(make_strategy(strategy, p.engine->cluster().host_of()));
  });
}

Status Peer::set_strategy_forest(std::vector<int> forest, std::string label) {
  Impl& p = *impl_;
  const int n = size();
  if (static_cast<int>(forest.size()) != n) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("set_strategy_forest: a forest of {} ranks for a cluster of {}",
                              forest.size(), n));
  }
  Strategy strategy;
  try {
    strategy = strategy_from_forest(forest);
  } catch (const std::exception& e) {
    return Status(ErrorCode::invalid_argument, fmt::format("set_strategy_forest: {}", e.what()));
  }
  strategy.name = std::move(label);
  p.loop.post([&p, strategy = std::move(strategy)]() mutable {
    if (p.engine) p.engine->set_strategy(std::move(strategy));
  });
  return {};
}

ResizeResult Peer::Impl::resize(
    const char* what, std::function<void(Engine&, Membership&, ClusterCallback)> protocol) {
  if (!membership && !options.elastic) {
    return {.status = Status(ErrorCode::invalid_argument,
                             fmt::format("{}: this worker is not elastic (start it with kfrun -w, "
                                         "which runs the config server)",
                                         what))};
  }
  std::promise<ResizeResult> result;
  auto future = result.get_future();
  loop.post([this, &result, what, protocol = std::move(protocol)] {
    if (!engine) {
      result.set_value({.status = Status(ErrorCode::cancelled,
                                         fmt::format("{}: the peer has left its cluster", what))});
      return;
    }
    protocol(*engine, *membership, [this, &result](Status s, ClusterSpec next) {
      if (!s.ok()) {
        result.set_value({.status = std::move(s)});
        return;
      }
      adopt(std::move(next), [&result](ResizeResult r) { result.set_value(std::move(r)); });
    });
  });
  ResizeResult r = future.get();
  if (r.changed) serial = 0;  // automatic names restart with the new cluster, as a joiner's do
  return r;
}

void Peer::Impl::adopt(ClusterSpec next, std::function<void(ResizeResult)> done) {
  if (next.version() == engine->cluster().version()) {
    done({});
    return;
  }
  const PeerID me = engine->cluster().worker(engine->rank());
  const auto rank = next.rank_of(me);
  if (!rank) {
    engine.reset();
    membership->leave([done = std::move(done)] { done({.changed = true, .detached = true}); });
    return;
  }
  // Peers that switched first may have sent to this worker already: keep those messages.
  auto early = engine->take_newer_messages();
  engine.reset();
  options.engine.strategy = configured;  // the strategy the new cluster's joiners start on
  membership->reconnect(next, *rank,
                        [this, next, rank = *rank, early = std::move(early),
                         done = std::move(done)](Transport& transport) mutable {
                          engine =
                              std::make_unique<Engine>(next, rank, loop, transport, options.engine);
                          fit_cores(next, rank);
                          for (auto& [source, message] : early)
                            engine->deliver(source, std::move(message));
                          {
                            std::lock_guard lock(config_mutex);
                            config.cluster = next;
                            config.rank = rank;
                          }
                          done({.changed = true});
                        });
}

ResizeResult Peer::resize(int workers) {
  return impl_->resize("resize", [workers](Engine& e, Membership& m, ClusterCallback done) {
    resize_cluster(e, m, workers, 0, std::move(done));
  });
}

ResizeResult Peer::resize_from_config_server() {
  return impl_->resize("resize", [](Engine& e, Membership& m, ClusterCallback done) {
    adopt_cluster(e, m, 0, std::move(done));
  });
}

Status Peer::propose_new_size(int workers) {
  Impl& p = *impl_;
  if (!p.membership) {
    return Status(ErrorCode::invalid_argument,
                  "propose_new_size: this worker is not elastic (start it with kfrun -w, which "
                  "runs the config server)");
  }
  std::promise<Status> result;
  auto future = result.get_future();
  p.loop.post([&p, &result, workers] {
    if (!p.engine) {
      result.set_value(
          Status(ErrorCode::cancelled, "propose_new_size: the peer has left its cluster"));
      return;
    }
    ClusterSpec proposal;
    try {
      proposal = p.membership->propose(p.engine->cluster(), workers);
    } catch (const std::exception& e) {
      result.set_value(
          Status(ErrorCode::invalid_argument, fmt::format("propose_new_size: {}", e.what())));
      return;
    }
    p.membership->put(proposal,
                      [&result](Status s, ClusterSpec) { result.set_value(std::move(s)); });
  });
  return future.get();
}

std::string Peer::next_name(const char* kind, std::string name) {
  if (!name.empty()) return name;
  // "kf.<kind>.<serial>", put together by hand: every automatic name passes here, and going
  // through fmt's formatting took about a tenth of a one-worker 8-byte allreduce's time.
  std::array<char, std::numeric_limits<std::uint64_t>::digits10 + 1> digits{};
  const auto end = std::to_chars(digits.data(), digits.data() + digits.size(), ++impl_->serial).ptr;
  const std::string_view k(kind);
  std::string out;
  out.reserve(3 + k.size() + 1 + static_cast<std::size_t>(end - digits.data()));
  out.append("kf.").append(k).append(1, '.').append(digits.data(), end);
  return out;
}

Handle Peer::allreduce_async(ConstBufferView input, BufferView output, ReduceOp op,
                             std::string name) {
  return impl_->launch(input.size_bytes(), [=, name = next_name("allreduce", std::move(name))](
                                               Engine& e, DoneCallback done) mutable {
    kf::allreduce(e, {.name = std::move(name), .input = input, .output = output, .op = op},
                  std::move(done));
  });
}

Status Peer::allreduce(ConstBufferView input, BufferView output, ReduceOp op, std::string name) {
  return start_and_wait(input.size_bytes(),
                        [&] { return allreduce_async(input, output, op, std::move(name)); });
}

Status Peer::broadcast(BufferView data, int root, std::string name) {
  return start_and_wait(data.size_bytes(),
                        [&] { return broadcast_async(data, root, std::move(name)); });
}

Status Peer::reduce(ConstBufferView input, BufferView output, ReduceOp op, int root,
                    std::string name) {
  return start_and_wait(input.size_bytes(),
                        [&] { return reduce_async(input, output, op, root, std::move(name)); });
}

Status Peer::allgather(ConstBufferView input, BufferView output, std::string name) {
  return start_and_wait(output.size_bytes(),
                        [&] { return allgather_async(input, output, std::move(name)); });
}

Status Peer::gather(ConstBufferView input, BufferView output, int root, std::string name) {
  return start_and_wait(std::max(input.size_bytes(), output.size_bytes()),
                        [&] { return gather_async(input, output, root, std::move(name)); });
}

Status Peer::barrier(std::string name) {
  return start_and_wait(0, [&] { return barrier_async(std::move(name)); });
}

Handle Peer::broadcast_async(BufferView data, int root, std::string name) {
  return impl_->launch(data.size_bytes(), [=, name = next_name("broadcast", std::move(name))](
                                              Engine& e, DoneCallback done) mutable {
    kf::broadcast(e, {.name = std::move(name), .input = data, .output = data, .root = root},
                  std::move(done));
  });
}

Handle Peer::reduce_async(ConstBufferView input, BufferView output, ReduceOp op, int root,
                          std::string name) {
  return impl_->launch(input.size_bytes(), [=, name = next_name("reduce", std::move(name))](
                                               Engine& e, DoneCallback done) mutable {
    kf::reduce(e,
               {.name = std::move(name), .input = input, .output = output, .op = op, .root = root},
               std::move(done));
  });
}

Handle Peer::allgather_async(ConstBufferView input, BufferView output, std::string name) {
  return impl_->launch(output.size_bytes(), [=, name = next_name("allgather", std::move(name))](
                                                Engine& e, DoneCallback done) mutable {
    kf::allgather(e, {.name = std::move(name), .input = input, .output = output}, std::move(done));
  });
}

Handle Peer::gather_async(ConstBufferView input, BufferView output, int root, std::string name) {
  return impl_->launch(
      std::max(input.size_bytes(), output.size_bytes()),
      [=, name = next_name("gather", std::move(name))](Engine& e, DoneCallback done) mutable {
        kf::gather(e, {.name = std::move(name), .input = input, .output = output, .root = root},
                   std::move(done));
      });
}

Handle Peer::barrier_async(std::string name) {
  return impl_->launch(
      0, [name = next_name("barrier", std::move(name))](Engine& e, DoneCallback done) {
        kf::barrier(e, name, std::move(done));
      });
}

Handle Peer::consensus_async(ConstBufferView bytes, std::shared_ptr<bool> agreed,
                             std::string name) {
  return impl_->launch(bytes.size_bytes(), [=, name = next_name("consensus", std::move(name))](
                                               Engine& e, DoneCallback done) {
    kf::consensus(e, name, bytes, [agreed, done = std::move(done)](Status s, bool ok) {
      if (agreed) *agreed = s.ok() && ok;
      done(std::move(s));
    });
  });
}

Status Peer::consensus(ConstBufferView bytes, bool* agreed, std::string name) {
  auto result = std::make_shared<bool>(false);
  Status s = start_and_wait(bytes.size_bytes(),
                            [&] { return consensus_async(bytes, result, std::move(name)); });
  if (agreed != nullptr) *agreed = *result;
  return s;
}

std::uint64_t Peer::save(const std::string& name, ConstBufferView bytes,
                         std::optional<std::uint64_t> version) {
  Impl& p = *impl_;
  return p.loop.call([&] { return p.engine ? save_blob(*p.engine, name, bytes, version) : 0; });
}

Handle Peer::request_async(int peer, std::string name, std::shared_ptr<Blob> out,
                           std::uint64_t version) {
  return impl_->launch(kUnknownBytes, [=](Engine& e, DoneCallback done) mutable {
    request_blob(e, {.peer = peer, .name = std::move(name), .version = version},
                 [out, done = std::move(done)](Status s, Blob blob) {
                   if (out) *out = std::move(blob);
                   done(std::move(s));
                 });
  });
}

Status Peer::request(int peer, std::string name, Blob* out, std::uint64_t version) {
  auto blob = std::make_shared<Blob>();
  Status s = start_and_wait(kUnknownBytes,
                            [&] { return request_async(peer, std::move(name), blob, version); });
  if (out != nullptr) *out = std::move(*blob);
  return s;
}

void Peer::post(std::function<void(Engine&)> fn) {
  Impl& p = *impl_;
  p.loop.post([&p, fn = std::move(fn)] {
    if (p.engine) fn(*p.engine);
  });
}

Handle Peer::start(std::function<void(Engine&, DoneCallback)> start, std::size_t bytes) {
  return impl_->launch(bytes, std::move(start));
}

SocketTransportStats Peer::transport_stats() const {
  Impl& p = *impl_;
  return p.loop.call(
      [&] { return p.transport() ? p.transport()->stats() : SocketTransportStats{}; });
}

}  // namespace kf
