// StepProgram: what a training step computes and communicates, under the Trainer's loop (which
// owns steps, policies, resizes and records). GradientProgram moves gradients of a profiled
// model's tensor sizes (phantom or real); NumericProgram (numeric_program.h) trains a real
// model with a distributed optimizer. A new kind of workload is one more StepProgram.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/engine.h"
#include "runtime/status.h"
#include "runtime/time.h"

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
};

class StepProgram {
 public:
  virtual ~StepProgram() = default;
  // Once, before the first step of a worker that starts the job (not one joining later).
  virtual void start(Engine& engine, DoneCallback done) { engine.reject(std::move(done), Status{}); }
  // The numeric work of a step (runs inside Compute: on a worker thread in the real world), or
  // empty for none.
  virtual std::function<void()> compute(std::int64_t step, int batch_per_worker) = 0;
  // After compute: the step's communication and update. `done` runs on the engine's executor.
  virtual void communicate(const StepContext& context, DoneCallback done) = 0;
  // What every worker must hold alike after a resize; rank 0's is broadcast to all.
  virtual std::vector<BufferView> state() = 0;
  // The cluster changed: this worker is now `rank` of `size`.
  virtual void resized(int /*rank*/, int /*size*/) {}
  // Monitored values of the step just finished (accuracy, loss, gradient noise scale, ...).
  virtual void values(std::map<std::string, double>& /*out*/) const {}
};

}  // namespace kf
