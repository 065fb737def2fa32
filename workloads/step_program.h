// StepProgram: what a training step computes and communicates, under the Trainer's loop (which
// owns steps, policies, resizes and records). GradientProgram moves gradients of a profiled
// model's tensor sizes (phantom or real); NumericProgram (numeric_program.h) trains a real
// model with a distributed optimizer. A new kind of workload is one more StepProgram.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/engine.h"
#include "runtime/status.h"
#include "runtime/time.h"
#include "workloads/step_timeline.h"

namespace kf {

// Told about every collective a program ran: name, bytes, begin and end in world time.
using CollectiveReport =
    std::function<void(const std::string& name, std::size_t bytes, TimePoint begin, TimePoint end)>;

struct StepContext {
  Engine& engine;
  std::int64_t step = 0;
  int batch_per_worker = 0;
  double learning_rate = 0;
  CollectiveReport report;
  TimePoint step_begin;  // when the step's compute began
  // Runs `task` on the engine's executor `delay` from now, unless the worker is gone by then.
  std::function<void(Duration delay, std::function<void()> task)> after;
};

class StepProgram {
 public:
  virtual ~StepProgram() = default;
  // Once, before the first step of a worker that starts the job (not one joining later).
  virtual void start(Engine& engine, DoneCallback done) {
    engine.reject(std::move(done), Status{});
  }
  // Before compute(), on the engine's executor: the step's context, for a program whose compute
  // starts the step's collectives itself as the device makes its gradients (kftrain -gpu with
  // bucketing), which needs the engine before communicate(). The default ignores it.
  virtual void begin(const StepContext& /*context*/) {}
  // The numeric work of a step (runs inside Compute: on a worker thread in the real world), or
  // empty for none.
  virtual std::function<void()> compute(std::int64_t step, int batch_per_worker) = 0;
  // Overlap: offsets within the step's compute (`compute` long at this step's batch) at which some
  // of the step's communication may start, each gradient as the backward pass makes it; the
  // trainer's Compute calls ready(context, i) at mark i (scaled as the compute is), all before
  // communicate(). Empty, the default: everything starts in communicate(), after the compute.
  virtual std::vector<Duration> ready_marks(Duration /*compute*/) { return {}; }
  virtual void ready(const StepContext& /*context*/, std::size_t /*mark*/) {}
  // With marks, or a program that overlaps by itself (begin()): the step's nominal timeline (for
  // the records' layer spans and exposed communication); else none.
  virtual std::shared_ptr<const StepTimeline> timeline() const { return nullptr; }
  // After compute: the step's (remaining) communication and update. `done` runs on the engine's
  // executor once all of the step's collectives, those ready() started included, are done.
  virtual void communicate(const StepContext& context, DoneCallback done) = 0;
  // What every worker must hold alike after a resize; rank 0's is broadcast to all.
  virtual std::vector<BufferView> state() = 0;
  // The cluster changed: this worker is now `rank` of `size`.
  virtual void resized(int /*rank*/, int /*size*/) {}
  // Monitored values of the step just finished (accuracy, loss, gradient noise scale, ...).
  virtual void values(std::map<std::string, double>& /*out*/) const {}
};

}  // namespace kf
