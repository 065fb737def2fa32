#include "launch/elastic_supervisor.h"

#include <pthread.h>
#include <signal.h>

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <thread>
#include <vector>

namespace kf {
namespace {

using Clock = std::chrono::steady_clock;

// Polls GET on its own thread, so a slow or dead server never holds up the supervisor's loop
// (worker output, signals, deadlines). Keeps the newest cluster seen and the last error.
class Watcher {
 public:
  // `from`: the version the runner starts from; later ones are reported, skipped ones included.
  Watcher(const ConfigClient& client, std::chrono::milliseconds interval, std::uint64_t from)
      : client_(client),
        interval_(interval),
        newest_(from),
        thread_([this](const std::stop_token& stop) { run(stop); }) {}

  // Every cluster seen with a version above `version`, oldest first: the newest polled and the
  // versions between that a poll skipped (two resizes within one interval), as far as the
  // server keeps them.
  std::vector<ClusterSpec> newer_than(std::uint64_t version) const {
    std::lock_guard lock(mu_);
    std::vector<ClusterSpec> out;
    for (auto it = seen_.upper_bound(version); it != seen_.end(); ++it)
      out.push_back(it->second);
    return out;
  }
  std::string error() const {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  void run(const std::stop_token& stop) {
    // kfrun's signals are for the supervisor's thread (its handler only writes to a pipe).
    sigset_t mask;
    sigemptyset(&mask);
    for (int sig : {SIGINT, SIGTERM, SIGCHLD})
      sigaddset(&mask, sig);
    ::pthread_sigmask(SIG_BLOCK, &mask, nullptr);
    while (!stop.stop_requested()) {
      std::optional<ClusterSpec> spec;
      std::string error;
      try {
        spec = client_.get();
      } catch (const std::exception& e) {
        error = e.what();
      }
      // Versions skipped since the last poll, fetched outside the lock.
      std::vector<ClusterSpec> skipped;
      if (spec && spec->version() > newest_ + 1) {
        const std::uint64_t from =
            std::max(newest_ + 1, spec->version() - std::min<std::uint64_t>(spec->version(), 64));
        for (std::uint64_t v = from; v < spec->version() && error.empty(); ++v) {
          try {
            if (auto past = client_.get_version(v)) skipped.push_back(std::move(*past));
          } catch (const std::exception& e) {
            error = e.what();
          }
        }
      }
      std::unique_lock lock(mu_);
      error_ = error;
      if (spec && spec->version() > newest_) {
        for (auto& past : skipped)
          seen_.insert_or_assign(past.version(), std::move(past));
        newest_ = spec->version();
        seen_.insert_or_assign(newest_, std::move(*spec));
        while (seen_.size() > 64)
          seen_.erase(seen_.begin());
      }
      wake_.wait_for(lock, stop, interval_, [] { return false; });
    }
  }

  const ConfigClient& client_;
  const std::chrono::milliseconds interval_;
  mutable std::mutex mu_;
  std::condition_variable_any wake_;
  std::map<std::uint64_t, ClusterSpec> seen_;  // the latest versions seen, by version
  std::uint64_t newest_ = 0;
  std::string error_;
  std::jthread thread_;  // last: stopped and joined before the members it uses go
};

std::string join_ids(const std::vector<PeerID>& ids) {
  std::string out;
  for (const auto& id : ids) {
    if (!out.empty()) out += ", ";
    out += id.to_string();
  }
  return out;
}

class ElasticRun {
 public:
  ElasticRun(const ElasticOptions& elastic, const SupervisorOptions& options,
             const ClusterSpec& initial)
      : elastic_(elastic),
        options_(options),
        client_(elastic.config_server, elastic.token, elastic.request_timeout),
        pool_(options),
        watcher_(client_, elastic.poll_interval, initial.version()) {}

  int run(const ClusterSpec& initial) {
    apply(initial, initial.version() > 0);
    for (;;) {
      pool_.turn(std::chrono::milliseconds(50));
      for (const auto& [id, code] : pool_.take_exits())
        exited(id, code);
      if (pool_.failure()) {
        if (pool_.running() == 0) break;  // the pool stops the others
        continue;
      }
      report_watcher_error();
      for (const auto& next : watcher_.newer_than(current_.version()))
        apply(next, true);
      retire_overdue();
      if (pool_.running() == 0 && done()) break;
    }
    return pool_.finish();
  }

 private:
  struct Dropped {
    Clock::time_point at;
    std::uint64_t version;
    bool retired = false;
  };

  // A newer cluster: start its local workers that the previous one did not have, note the
  // running ones it dropped. A worker in both is left alone, running or not: it was a member all
  // along, so one that has exited 0 finished (it may have seen this version before we did).
  void apply(const ClusterSpec& spec, bool joining) {
    const std::set<PeerID> before(current_.workers().begin(), current_.workers().end());
    current_ = spec;
    const auto launches = elastic_local_workers(spec, elastic_.self, elastic_.strategy,
                                                elastic_.config_server, elastic_.env, joining);
    std::vector<const WorkerLaunch*> to_start;
    std::set<PeerID> local;
    for (const auto& w : launches) {
      local.insert(w.id);
      if (before.contains(w.id)) continue;
      if (!pool_.is_running(w.id)) {
        to_start.push_back(&w);
      } else {
        // Back in before its previous run (dropped earlier) left: start it again once that run
        // exits.
        dropped_.erase(w.id);
        restart_on_exit_.insert(w.id);
      }
    }
    std::vector<PeerID> dropped;
    for (const auto& id : alive_) {
      if (local.contains(id) || dropped_.contains(id)) continue;
      dropped_[id] = Dropped{Clock::now(), spec.version()};
      restart_on_exit_.erase(id);
      dropped.push_back(id);
    }
    std::vector<PeerID> starting;
    for (const auto* w : to_start)
      starting.push_back(w->id);
    std::string line = fmt::format("cluster version {}: {} workers; ", spec.version(), spec.size());
    line += starting.empty() ? fmt::format("nothing to start on {}", elastic_.self)
                             : "starting " + join_ids(starting);
    if (!dropped.empty()) line += "; dropped (should exit by themselves): " + join_ids(dropped);
    pool_.say(line);
    for (const auto* w : to_start)
      start(*w);
  }

  void start(const WorkerLaunch& w) {
    pool_.start(w);
    alive_.insert(w.id);
    last_code_.erase(w.id);
  }

  void exited(const PeerID& id, int code) {
    alive_.erase(id);
    dropped_.erase(id);
    last_code_[id] = code;
    // A non-zero code here is a retired run's (anything else failed the job).
    if (restart_on_exit_.erase(id) == 0 || pool_.failure()) return;
    for (const auto& w : elastic_local_workers(current_, elastic_.self, elastic_.strategy,
                                               elastic_.config_server, elastic_.env, true)) {
      if (w.id != id) continue;
      pool_.say(fmt::format("{} is in cluster version {}: starting it again", id.to_string(),
                            current_.version()));
      start(w);
    }
  }

  void retire_overdue() {
    const auto now = Clock::now();
    for (auto& [id, d] : dropped_) {
      if (d.retired || now - d.at < options_.detach_timeout) continue;
      d.retired = true;
      pool_.say(
          fmt::format("{} is still running {} s after cluster version {} dropped it: stopping it",
                      id.to_string(),
                      std::chrono::duration<double>(options_.detach_timeout).count(), d.version));
      pool_.retire(id);
    }
  }

  void report_watcher_error() {
    const std::string error = watcher_.error();
    if (error == logged_error_) return;
    if (error.empty()) {
      pool_.say("config server reachable again");
    } else {
      pool_.say(error + " (retrying)");
    }
    logged_error_ = error;
  }

  // With no local worker running: after a fresh GET, is this runner's part of the job over?
  // May start workers of a newer version instead.
  bool done() {
    const auto now = Clock::now();
    if (last_fresh_get_ && now - *last_fresh_get_ < elastic_.poll_interval) return false;
    last_fresh_get_ = now;
    std::optional<ClusterSpec> fresh;
    try {
      fresh = client_.get();
      failing_since_.reset();
    } catch (const std::exception& e) {
      if (!failing_since_) failing_since_ = now;
      if (now - *failing_since_ < elastic_.server_lost_after) return false;
      pool_.say(fmt::format("config server lost for {} s ({}): deciding on cluster version {}",
                            std::chrono::duration<double>(elastic_.server_lost_after).count(),
                            e.what(), current_.version()));
      return finished_on(current_, true);
    }
    if (!fresh) {
      pool_.say("the config server holds no cluster any more (cleared): stopping");
      return true;
    }
    // Not over while a newer version exists. The watcher hands it over with every version it
    // skipped, in order: applying only the newest here would take a worker that a version in
    // between dropped (and that exited 0 as told) for one that never left, and not start it
    // again when the newest adds it back.
    if (fresh->version() > current_.version()) return false;
    return finished_on(current_, false);
  }

  bool finished_on(const ClusterSpec& spec, bool server_lost) {
    std::vector<PeerID> local;
    for (const auto& id : spec.workers())
      if (id.host == elastic_.self) local.push_back(id);
    if (local.empty()) {
      // Idle, whether it never had a worker or a shrink dropped all of them: a later resize may
      // grow the job back onto this host, so watch on until the config is cleared (done() sees
      // the 404) or the server is lost.
      if (!server_lost) return false;
      pool_.say(fmt::format("cluster version {} has no worker on {}: done", spec.version(),
                            elastic_.self));
      return true;
    }
    std::vector<PeerID> missing;
    for (const auto& id : local) {
      const auto it = last_code_.find(id);
      if (it == last_code_.end() || it->second != 0) missing.push_back(id);
    }
    if (missing.empty()) {
      pool_.say(fmt::format("cluster version {}: every worker on {} exited 0: done", spec.version(),
                            elastic_.self));
      return true;
    }
    if (server_lost) return true;
    // Not run for the latest version (a start was missed): start them now.
    pool_.say(fmt::format("cluster version {}: {} not run yet", spec.version(), join_ids(missing)));
    for (const auto& w : elastic_local_workers(spec, elastic_.self, elastic_.strategy,
                                               elastic_.config_server, elastic_.env, true))
      if (std::find(missing.begin(), missing.end(), w.id) != missing.end()) start(w);
    return false;
  }

  const ElasticOptions& elastic_;
  const SupervisorOptions& options_;
  ConfigClient client_;
  WorkerPool pool_;
  Watcher watcher_;
  ClusterSpec current_;
  std::set<PeerID> alive_;             // local workers running now
  std::map<PeerID, int> last_code_;    // exit code of each local worker's latest run
  std::map<PeerID, Dropped> dropped_;  // running, but no longer in the cluster
  std::set<PeerID> restart_on_exit_;   // re-added while its previous run was still going
  std::optional<Clock::time_point> last_fresh_get_;
  std::optional<Clock::time_point> failing_since_;  // fresh GETs failing since
  std::string logged_error_;
};

}  // namespace

ClusterSpec initial_cluster(const ConfigClient& client, const ClusterSpec& planned,
                            std::chrono::milliseconds patience) {
  const auto deadline = Clock::now() + patience;
  for (;;) {
    try {
      if (auto stored = client.get()) return *stored;
      return client.reset(planned);
    } catch (const std::runtime_error& e) {
      if (Clock::now() >= deadline) {
        throw std::runtime_error(fmt::format("no cluster config within {} s: {}",
                                             std::chrono::duration<double>(patience).count(),
                                             e.what()));
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int supervise_elastic(const ClusterSpec& initial, const ElasticOptions& elastic,
                      const SupervisorOptions& options) {
  ElasticRun run(elastic, options, initial);
  return run.run(initial);
}

}  // namespace kf
