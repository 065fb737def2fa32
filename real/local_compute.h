// LocalCompute: the real world's Compute. Numeric work runs on a worker thread of its own, so the
// peer's event loop keeps moving messages meanwhile (communication overlaps computation); when
// work has no numeric part, or finishes early, the rest of the profiled duration is waited out on
// the loop's timer, so byte-only workloads keep their real step time. The work's marks (gradients
// ready during the backward pass) run on the loop's timers at their offsets from the start, so a
// bucket's allreduce goes out while the rest of the step is still being waited out; with numeric
// work a mark waits for the math too, since the numeric models compute every gradient at once.
#pragma once

#include "real/event_loop.h"
#include "runtime/compute.h"

namespace kf {

class LocalCompute final : public Compute {
 public:
  explicit LocalCompute(Executor& caller) : caller_(caller) {}
  void run(ComputeWork work, std::function<void()> done) override;

 private:
  Executor& caller_;
  EventLoop worker_;  // runs the numeric work, one step at a time
};

}  // namespace kf
