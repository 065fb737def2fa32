// Trainer: one worker's synchronous data-parallel training loop, written once against the runtime
// (Engine, Compute, Executor, Membership) so the same code runs in every world. Each step: compute
// the gradients (the profiled forward + backward time of the local batch), allreduce every
// gradient bucket concurrently under its own name, then, when policies are configured, run the
// policies' agreement round and apply what they decided, on every worker before the same next
// step: a strategy switch, a batch size or learning rate, a stop, or a resize (the elastic
// protocol, a new engine for the new cluster version, then state sync: step by allreduce-max,
// policy state and model by broadcast from rank 0). Gradients are phantoms by default: the bytes
// move, no memory is touched.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "policies/policy_runner.h"
#include "runtime/buffer.h"
#include "runtime/compute.h"
#include "runtime/engine.h"
#include "runtime/membership.h"
#include "runtime/monitor.h"
#include "workloads/bucketing.h"
#include "workloads/model.h"
#include "workloads/step_program.h"

namespace kf {

struct TrainerOptions {
  const ModelProfile* model = nullptr;  // the default program's (and the profiled compute time's)
  int batch_per_worker = 32;
  std::size_t fusion_bytes = 0;  // 0: one allreduce per gradient tensor
  // When gradients start (workloads/bucketing.h): none, after the compute; else as ready.
  BucketingOptions bucketing;
  std::string device;  // picks a profile's per-layer times for the step's timeline
  bool phantom = true;
  std::int64_t steps = 10;
  std::chrono::nanoseconds compute_per_sample{0};
  EngineOptions engine;              // for this worker's engine, and its successors
  std::int64_t steps_per_epoch = 0;  // 0: the whole run is one epoch
  double learning_rate = 0.1;
  int ping_every = 0;    // probe every peer's latency every this many steps (0: never)
  bool joining = false;  // started by a runner in a resize: sync state first
  // Real gradients only: fill each bucket with (rank + 1 + step % 5) before its allreduce and
  // check every element of the sum after it; a wrong sum fails the worker, naming the bucket.
  bool verify = false;
  // What a step computes and moves; unset: a GradientProgram of `model` (fusion, phantom,
  // verify as above). Called once with this worker's rank and cluster size.
  std::function<std::unique_ptr<StepProgram>(int rank, int size)> program;
};

// What a trainer gets from its world. `membership` makes it elastic; without it `transport` is
// the one fixed transport.
struct TrainerWorld {
  Executor& executor;
  Compute& compute;
  Transport* transport = nullptr;
  Membership* membership = nullptr;
};

struct StepRecord {
  int rank = 0;
  std::int64_t step = 0;
  TimePoint begin, compute_end, end;
  // Overlapped steps only (StepProgram::ready_marks gave marks): when the step's first collective
  // started, and the compute's nominal timeline (each layer's backward, for trace.json).
  std::optional<TimePoint> comm_begin;
  std::shared_ptr<const StepTimeline> timeline;
  std::int64_t samples = 0;
  std::string strategy;
  int cluster_size = 0;
  StepMetrics metrics;
  std::string policy_sums;  // the agreed sums, ';'-separated ("" without policies)
  std::string actions;      // decided after this step, applied before the next ("; "-separated)
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
  // Something the job did to itself (a switch, a resize, a sync warning), seen from one worker.
  // `kind`: switch, resize, batch, lr, stop, joined, detached, warning.
  virtual void adapted(int /*rank*/, std::int64_t /*step*/, const std::string& /*kind*/,
                       const std::string& /*detail*/, TimePoint /*at*/) {}
};

class Trainer {
 public:
  Trainer(ClusterSpec cluster, int rank, TrainerWorld world, TrainerOptions options,
          PolicyRunner policies, TrainingObserver& observer);
  ~Trainer();

  void start();  // on the world's executor
  // The worker died: drop the engine and ignore every later completion.
  void abandon();
  bool finished() const { return finished_; }
  bool detached() const { return detached_; }
  std::int64_t step() const { return step_; }
  // The current engine (none once finished or abandoned).
  Engine* engine() const { return engine_.get(); }
  // Who this worker is in the cluster, stable across resizes.
  const PeerID& id() const { return id_; }
  // What a step computes and communicates (for the simulator's records of a numeric model).
  const StepProgram* program() const { return program_.get(); }

 private:
  TrainingState state() const;
  void begin_step();
  void probe_latencies();
  StepContext context();
  void communicate();
  void communicated(const Status& status);
  void record_step(const PolicyOutcome& outcome);
  void apply(std::vector<Action> actions);
  // elastic (trainer_elastic.cc)
  void resize(int workers);
  void rebuild(ClusterSpec next);
  void sync(std::function<void()> then);
  // On `transport`, or the world's transport for the cluster when none is given.
  void build_engine(const ClusterSpec& cluster, int rank, Transport* transport = nullptr);
  void finish(const Status& status);

  PeerID id_;
  TrainerWorld world_;
  TrainerOptions options_;
  PolicyRunner policies_;
  TrainingObserver& observer_;
  std::unique_ptr<Engine> engine_;
  Monitor monitor_;
  std::unique_ptr<StepProgram> program_;
  std::int64_t step_ = 0;
  int batch_per_worker_;
  double learning_rate_;
  StepRecord current_;
  StepMetrics metrics_;
  bool stop_requested_ = false;
  bool finished_ = false;
  bool detached_ = false;
  bool abandoned_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for callbacks after destruction
};

}  // namespace kf
