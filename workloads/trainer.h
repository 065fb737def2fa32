// Trainer: one worker's synchronous data-parallel training loop, written once against the runtime
// (Engine, Compute, Executor) so the same code runs in every world. Each step: compute the
// gradients (the profiled forward + backward time of the local batch), then allreduce every
// gradient bucket concurrently, each under its own name, and start the next step when all are
// done. Gradients are phantoms by default: the bytes move, no memory is touched.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/compute.h"
#include "runtime/engine.h"
#include "workloads/model.h"

namespace kf {

struct TrainerOptions {
  const ModelProfile* model = nullptr;
  int batch_per_worker = 32;
  std::size_t fusion_bytes = 0;  // 0: one allreduce per gradient tensor
  bool phantom = true;
  std::int64_t steps = 10;
  std::chrono::nanoseconds compute_per_sample{0};
};

struct StepRecord {
  int rank = 0;
  std::int64_t step = 0;
  TimePoint begin, compute_end, end;
  std::int64_t samples = 0;
  std::string strategy;
  int cluster_size = 0;
};

struct CollectiveRecord {
  int rank = 0;
  std::int64_t step = 0;
  std::string name;
  std::size_t bytes = 0;
  TimePoint begin, end;
  std::string strategy;
};

// Receives what the trainers do, on their executors.
class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void step_started(int rank, std::int64_t step, TimePoint at) = 0;
  virtual void step_finished(const StepRecord& record) = 0;
  virtual void collective_finished(const CollectiveRecord& record) = 0;
  virtual void worker_finished(int rank, const Status& status, TimePoint at) = 0;
};

class Trainer {
 public:
  Trainer(Engine& engine, Compute& compute, TrainerOptions options, TrainingObserver& observer);

  void start();  // on the engine's executor
  // The worker died: ignore every later completion (its engine is about to go away).
  void abandon() { abandoned_ = true; }
  bool finished() const { return finished_; }
  std::int64_t step() const { return step_; }

 private:
  void begin_step();
  void allreduce_gradients();
  void bucket_done(std::size_t bucket, TimePoint begin, const Status& status);
  void finish(const Status& status);

  Engine& engine_;
  Compute& compute_;
  TrainerOptions options_;
  TrainingObserver& observer_;
  std::vector<Buffer> buckets_;
  std::vector<std::string> bucket_names_;
  std::int64_t step_ = 0;
  StepRecord current_;
  std::size_t pending_ = 0;
  Status step_error_;
  bool finished_ = false;
  bool abandoned_ = false;
};

}  // namespace kf
