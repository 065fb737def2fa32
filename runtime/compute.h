// Compute: "run this step's local work". The real world really computes (and, with no numeric work
// attached, waits out the profiled duration); the simulated world advances simulated time by the
// profiled duration times the straggler factor and still runs the numeric work, so models learn.
// C++17: included by world glue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/time.h"

namespace kf {

struct ComputeWork {
  std::int64_t step = 0;
  std::int64_t samples = 0;
  Duration profiled{0};           // what the workload profile says this work takes
  std::function<void()> numeric;  // real math to run (may be empty for byte-only workloads)
  // Points inside the work (offsets within `profiled`, nondecreasing, none past it) at which
  // `at_mark(i)` runs on the caller's executor, in order and all before `done`: a gradient ready
  // during the backward pass. They stretch as the work does (a straggler's marks come later). A
  // mark never runs before `numeric` has returned, when there is one: it writes the gradients.
  std::vector<Duration> marks;
  std::function<void(std::size_t)> at_mark;
};

class Compute {
 public:
  virtual ~Compute() = default;
  // Calls `done` on the caller's executor once the work has finished in this world's time.
  virtual void run(ComputeWork work, std::function<void()> done) = 0;
};

}  // namespace kf
