#include "real/local_compute.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace kf {

namespace {

// One step's work on the caller's executor. Three things must happen before `done`: the numeric
// part has finished (the gradients exist), the profiled duration has passed, and every mark has
// run. A mark runs once its offset has passed and the numeric part has finished, in index order:
// the gradients a mark hands to communication are written by the numeric part, which computes
// them all at once.
struct StepInFlight {
  ComputeWork work;
  std::function<void()> done;
  bool numeric_done = false;
  bool profiled_passed = false;
  std::size_t marks_due = 0;  // marks whose offset has passed
  std::size_t marks_run = 0;

  void advance() {
    if (!numeric_done) return;
    while (marks_run < marks_due)
      work.at_mark(marks_run++);
    if (profiled_passed && marks_run == work.marks.size() && done) std::exchange(done, nullptr)();
  }
};

}  // namespace

void LocalCompute::run(ComputeWork work, std::function<void()> done) {
  auto step = std::make_shared<StepInFlight>();
  step->done = std::move(done);
  std::function<void()> numeric = std::move(work.numeric);
  step->work = std::move(work);
  step->numeric_done = !numeric;
  // The timers count from now, on the caller's clock; a mark at offset 0 still waits its turn
  // behind the tasks already posted, as every mark does.
  for (std::size_t i = 0; i < step->work.marks.size(); ++i) {
    caller_.post_after(step->work.marks[i], [step, i] {
      step->marks_due = std::max(step->marks_due, i + 1);
      step->advance();
    });
  }
  caller_.post_after(step->work.profiled, [step] {
    step->profiled_passed = true;
    step->advance();
  });
  if (numeric) {
    worker_.post([this, step, numeric = std::move(numeric)] {
      numeric();
      caller_.post([step] {
        step->numeric_done = true;
        step->advance();
      });
    });
  }
}

}  // namespace kf
