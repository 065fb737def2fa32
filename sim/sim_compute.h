// A worker slot's Compute in a simulated world (ns-3 or flow level): simulated time passes for
// the profiled duration times the straggler factor times a jitter draw. One implementation for
// both worlds, so that their compute timelines are the same draw for draw and the worlds differ
// only in their networks. C++17: included by the ns-3 glue.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <random>
#include <utility>

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
    schedule_after_(std::chrono::nanoseconds(static_cast<std::int64_t>(
                        static_cast<double>(work.profiled.count()) * scale)),
                    std::move(done));
  }

  double factor = 1.0;  // straggler slowdown

 private:
  ScheduleAfter schedule_after_;
  std::mt19937_64 rng_;
  double jitter_;
};

}  // namespace kf
