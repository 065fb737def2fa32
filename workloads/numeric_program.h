// NumericProgram: a real model trained with a distributed optimizer, in any world. Each step the
// worker computes the gradient of its batch (its shard of the data, reshuffled every epoch),
// then, by `sync`:
//   ssgd     allreduce the gradients, average, apply (synchronous SGD);
//   sma      allreduce the models, v <- (1 - alpha) v + alpha avg, apply the local gradient
//            (synchronous model averaging, alpha 0.1);
//   pair_avg ask a random other worker for its latest saved model (p2p), average with it, apply
//            the local gradient, save (AD-PSGD);
//   ada_sgd  sma until `ada_switch_step`, then rank 0's model is broadcast and ssgd follows.
// The local optimizer (SGD with momentum, Adam) applies the update. All workers start from rank
// 0's initial model (a broadcast). Monitors: the training loss every step, test accuracy every
// eval_every steps, the gradient noise scale every gns_every steps and the gradient variance
// every variance_every steps (extra collectives where the optimizer does not already have them).
#pragma once

#include <memory>
#include <random>
#include <string>

#include "workloads/dataset.h"
#include "workloads/gradient_monitors.h"
#include "workloads/numeric_model.h"
#include "workloads/optimizer.h"
#include "workloads/step_program.h"

namespace kf {

struct NumericOptions {
  std::shared_ptr<const NumericModel> model;
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> test;
  std::string sync = "ssgd";  // ssgd, sma, pair_avg, ada_sgd
  double sma_alpha = 0.1;
  std::int64_t ada_switch_step = 100;
  OptimizerOptions optimizer;
  std::uint64_t seed = 1;
  int eval_every = 10;  // 0: never
  int gns_every = 0;    // 0: off
  double gns_ema = 0.9;
  int variance_every = 0;  // 0: off
  // Bytes the step's communication should cost beyond the numeric model's own (a phantom
  // allreduce of the difference runs beside the optimizer's collectives): so a small model can
  // learn at the network cost of the profiled model it stands in for, in the simulated world.
  std::size_t cost_bytes = 0;
};

// Throws std::invalid_argument naming the known sync kinds.
void validate(const NumericOptions& options);

class NumericProgram final : public StepProgram {
 public:
  NumericProgram(NumericOptions options, int rank, int size);

  void start(Engine& engine, DoneCallback done) override;
  std::function<void()> compute(std::int64_t step, int batch_per_worker) override;
  void communicate(const StepContext& context, DoneCallback done) override;
  std::vector<BufferView> state() override;
  void resized(int rank, int size) override;
  void values(std::map<std::string, double>& out) const override;

  std::span<const float> parameters() const { return params_; }
  int rank() const { return rank_; }

 private:
  using Next = std::function<void(Status)>;
  void average_gradients(const StepContext& ctx, Next next);
  void average_models(const StepContext& ctx, Next next);
  void pair_average(const StepContext& ctx, Next next);
  void monitors(const StepContext& ctx, bool gradients_averaged, Next next);
  void finish_step(const StepContext& ctx);
  void synchronize(const StepContext& ctx, DoneCallback done);
  bool variance_step(std::int64_t step) const;

  NumericOptions options_;
  int rank_;
  int size_;
  std::vector<float> params_;
  std::vector<float> grad_;
  std::vector<float> scratch_;
  std::vector<float> scratch2_;
  std::vector<float> local_sq_;  // this worker's g^2, on variance steps
  Buffer padding_;               // phantom: cost_bytes minus the model's
  std::unique_ptr<LocalOptimizer> optimizer_;
  ShardSampler sampler_;
  std::vector<std::size_t> batch_;
  std::mt19937_64 peers_;
  GnsEstimator gns_;
  double loss_ = 0;
  double small_norm2_ = 0;
  std::optional<Evaluation> evaluation_;
  std::optional<double> variance_;
};

}  // namespace kf
