// PolicyRunner: a stack of policies and the agreement step that makes them act as one. After a
// training step it (1) sums every policy's contribution over the cluster with one small
// allreduce, (2) lets each policy decide from the identical sums, (3) checks by consensus that
// every worker decided the same actions, and hands them to the trainer to apply before the next
// step. Actions from several policies are applied in stack order.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "policies/policy.h"
#include "runtime/engine.h"
#include "runtime/status.h"

namespace kf {

struct PolicyOutcome {
  std::vector<Action> actions;
  std::vector<double> sums;  // every policy's summed contributions, concatenated (for records)
};

class PolicyRunner {
 public:
  PolicyRunner() = default;
  explicit PolicyRunner(std::vector<std::unique_ptr<Policy>> policies);

  bool empty() const { return policies_.empty(); }
  const std::vector<std::unique_ptr<Policy>>& policies() const { return policies_; }

  void before_train(const TrainingState& state);
  void before_epoch(const TrainingState& state);
  void before_step(const TrainingState& state);
  void after_epoch(const TrainingState& state);
  void after_train(const TrainingState& state);
  void applied(const Action& action, const TrainingState& state);

  // The agreement step; `done` runs on the engine's executor. Collective names carry the step,
  // so every worker must call this once per step with the same step.
  void after_step(Engine& engine, const StepMetrics& local, const TrainingState& state,
                  std::function<void(Status, PolicyOutcome)> done);

  // Every policy's history, flattened (count, then length + values per policy).
  std::vector<double> save_state() const;
  void load_state(std::span<const double> state);

 private:
  std::vector<std::unique_ptr<Policy>> policies_;
};

}  // namespace kf
