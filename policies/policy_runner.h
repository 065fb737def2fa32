// PolicyRunner: a stack of policies and the agreement step that makes them act as one. After a
// training step it (1) sums every policy's contribution over the cluster with one small
// allreduce, (2) lets each policy decide from the identical sums, (3) checks by consensus that
// every worker decided the same actions, and hands them to the trainer to apply before the next
// step. Actions from several policies are applied in stack order.
//
// The round is also available in phases, for a caller that runs the two collectives itself on a
// thread of its own (the Python bindings, which must never run a Python policy on the engine's
// loop): contributions(), their sum over the cluster by an allreduce of f64 named sums_name(step),
// decide() on the sums, then a consensus on encode(outcome.actions) named agreement_name(step),
// and disagreement() as the error when it fails. after_step is exactly these phases on an engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "policies/policy.h"
#include "runtime/engine.h"
#include "runtime/status.h"

namespace kf {

struct PolicyOutcome {
  std::vector<Action> actions;
  std::vector<double> sums;  // every policy's summed contributions, concatenated (for records)
  std::vector<std::size_t> asked_by;  // per action: the index in the stack of the policy that asked
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

  // Phase 1: every policy's contribution, concatenated in stack order. Remembers each policy's
  // share of the vector for the decide() that follows.
  std::vector<double> contributions(const StepMetrics& local, const TrainingState& state);
  // Phase 2: every policy decides, in stack order, from `sums`: the vectors contributions()
  // returned on every worker, summed (the same layout). Throws std::logic_error when `sums` does
  // not have that layout (no contributions() before it, or a different size).
  PolicyOutcome decide(const StepMetrics& local, std::span<const double> sums,
                       const TrainingState& state);
  // The collectives' names: they carry the step, so consecutive rounds never meet.
  static std::string sums_name(std::int64_t step);
  static std::string agreement_name(std::int64_t step);
  // The error of a round whose consensus found the workers' actions different.
  static Status disagreement(int rank, const std::vector<Action>& actions);

  // Every policy's history, flattened (count, then length + values per policy).
  std::vector<double> save_state() const;
  void load_state(std::span<const double> state);

 private:
  std::vector<std::unique_ptr<Policy>> policies_;
  std::vector<std::size_t> lengths_;  // each policy's share of the last contributions()
};

}  // namespace kf
