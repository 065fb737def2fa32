// adaptive_batch_size: the gradient-noise-scale batch policy of the KungFu paper (Fig. 4), never
// released upstream. Every `interval` steps the workers' noise-scale estimates (the "gns" metric
// of workloads/gradient_monitors.h) are averaged; the target global batch is scale x GNS, split
// over the workers and clamped to [min_batch, max_batch] per worker; when it differs from the
// current batch by more than min_change, every worker moves to it at the same step, with the
// learning rate rescaled from the initial one (linear: lr x B / B0; sqrt: lr x sqrt(B / B0)).
#pragma once

#include <string>

#include "policies/policy.h"

namespace kf {

struct AdaptiveBatchSizeOptions {
  int interval = 10;
  int min_batch = 16;    // per worker
  int max_batch = 1024;  // per worker
  double scale = 1.0;
  std::string lr_rule = "linear";  // linear, sqrt or none
  double min_change = 0.2;
};

class AdaptiveBatchSize final : public Policy {
 public:
  explicit AdaptiveBatchSize(AdaptiveBatchSizeOptions options);
  std::string name() const override { return "adaptive_batch_size"; }
  void before_train(const TrainingState& state) override;
  std::vector<double> contribute(const StepMetrics& local, const TrainingState& state) override;
  void after_step(const StepMetrics& local, std::span<const double> sums,
                  const TrainingState& state, std::vector<Action>& actions) override;
  std::vector<double> save_state() const override { return {base_batch_, base_lr_}; }
  void load_state(std::span<const double> s) override;

 private:
  AdaptiveBatchSizeOptions options_;
  double base_batch_ = 0;
  double base_lr_ = 0;
};

}  // namespace kf
