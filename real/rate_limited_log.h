// A log that a flood cannot flood: at most `per_second` lines a second reach the sink; how many
// were left out is told with the next line that passes, and when the log goes away, so none goes
// unseen. For refusals of strangers (a port scan, a misconfigured client, an attack), which come
// in bursts and say the same thing each time. Thread-safe.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>

namespace kf {

class RateLimitedLog {
 public:
  using Sink = std::function<void(const std::string&)>;
  // `what`: the plural noun of the left-out count ("refused connections"); `prefix` starts the
  // count's line as it starts the others ("[kfconfig] ").
  RateLimitedLog(Sink sink, std::string what, std::string prefix = "", int per_second = 10)
      : sink_(std::move(sink)),
        what_(std::move(what)),
        prefix_(std::move(prefix)),
        per_second_(per_second) {}
  ~RateLimitedLog() {
    std::lock_guard lock(mu_);
    flush_dropped();
  }
  RateLimitedLog(const RateLimitedLog&) = delete;
  RateLimitedLog& operator=(const RateLimitedLog&) = delete;

  void log(const std::string& line) {
    std::lock_guard lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_ >= std::chrono::seconds(1)) {
      flush_dropped();
      window_ = now;
      in_window_ = 0;
    }
    if (++in_window_ > per_second_) {
      ++dropped_;
      return;
    }
    sink_(line);
  }

  std::uint64_t dropped_total() const {
    std::lock_guard lock(mu_);
    return dropped_total_;
  }

 private:
  void flush_dropped() {
    if (dropped_ == 0) return;
    sink_(fmt::format("{}({} more {} not shown)", prefix_, dropped_, what_));
    dropped_total_ += dropped_;
    dropped_ = 0;
  }

  Sink sink_;
  std::string what_;
  std::string prefix_;
  int per_second_;
  mutable std::mutex mu_;
  std::chrono::steady_clock::time_point window_{};
  int in_window_ = 0;
  std::uint64_t dropped_ = 0;
  std::uint64_t dropped_total_ = 0;
};

}  // namespace kf
