// A worker slot's Compute in a simulated world (ns-3 or flow level): simulated time passes for
// the profiled duration times the straggler factor times a jitter draw. One implementation for
// both worlds, so that their compute timelines are the same draw for draw and the worlds differ
// only in their networks. C++17: included by the ns-3 glue.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "runtime/compute.h"

namespace kf {

class SimCompute final : public Compute {
 public:
  // Runs `done` on the world's clock `delay` from now.
  using ScheduleAfter = std::function<void(std::chrono::nanoseconds delay, std::function<void()>)>;

  // The jitter generator is seeded by (seed, rank): a worker's draws do not depend on how the
  // others' computations interleave with it.
  SimCompute(ScheduleAfter schedule_after, std::uint64_t seed, int rank, double jitter)
      : schedule_after_(std::move(schedule_after)),
        rng_(seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(rank)),
        jitter_(jitter) {}

  void run(ComputeWork work, std::function<void()> done) override {
    if (work.numeric) work.numeric();  // real math, at this simulated instant
    double scale = factor;
    if (jitter_ > 0) {
      // Compute times scale by a factor uniform in [1 - jitter, 1 + jitter]. 53 random bits ->
      // [0, 1) by hand: std::generate_canonical may differ between standard libraries.
      const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
      scale *= 1.0 + jitter_ * (2 * u - 1);
    }
    const auto scaled = [scale](Duration d) {
      return Duration(static_cast<std::int64_t>(static_cast<double>(d.count()) * scale));
    };
    if (work.marks.empty()) {
      schedule_after_(scaled(work.profiled), std::move(done));
      return;
    }
    // The marks one after another, each at its own scaled offset from the start, then done at the
    // whole work's: one pending event per worker, not one per mark.
    auto chain = std::make_shared<Chain>();
    chain->at.reserve(work.marks.size() + 1);
    for (const Duration m : work.marks)
      chain->at.push_back(scaled(m));
    chain->at.push_back(scaled(work.profiled));
    chain->at_mark = std::move(work.at_mark);
    chain->done = std::move(done);
    next(std::move(chain), Duration(0));
  }

  double factor = 1.0;  // straggler slowdown

 private:
  struct Chain {
    std::vector<Duration> at;  // the marks' offsets, then the end's
    std::size_t next = 0;
    std::function<void(std::size_t)> at_mark;
    std::function<void()> done;
  };
  // Waits from `now` (an offset in the work) for the chain's next point, runs it, goes on.
  void next(std::shared_ptr<Chain> chain, Duration now) {
    const Duration at = std::max(now, chain->at[chain->next]);
    schedule_after_(at - now, [this, chain, at]() mutable {
      const std::size_t i = chain->next++;
      if (chain->next == chain->at.size()) {
        chain->done();
        return;
      }
      chain->at_mark(i);
      next(std::move(chain), at);
    });
  }

  ScheduleAfter schedule_after_;
  std::mt19937_64 rng_;
  double jitter_;
};

}  // namespace kf
