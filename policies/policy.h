// The policy API: a policy watches a training job through hooks and asks for changes through
// actions. It runs unchanged in every world, so it sees only world time and monitored metrics.
//
// Agreement is the runner's job (policy_runner.h): after each step every worker's policies
// contribute numbers that are summed across the cluster by one allreduce; every policy then
// decides from those identical sums, so every worker decides the same; the runner checks that
// with a consensus on the encoded actions and the trainer applies them before the next step, on
// every worker at once. A policy that needs history keeps it as plain numbers (save_state /
// load_state) so a worker that joins after a resize gets rank 0's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "runtime/monitor.h"
#include "topology/strategy.h"

namespace kf {

// Switch every worker's allreduce strategy: to a named one, or to a spanning tree given as a
// forest (parent[i] = parent of i, the root its own parent; e.g. a star rooted at rank 1).
struct SwitchStrategy {
  std::optional<StrategyName> name;
  std::vector<int> forest;
  std::string label;  // what the records call it: "STAR", "STAR@1", "MST"
};
struct Resize {
  int workers = 0;
};
struct SetBatchSize {
  int per_worker = 0;
};
struct SetLearningRate {
  double value = 0;
};
struct StopTraining {
  std::string reason;
};
using Action = std::variant<SwitchStrategy, Resize, SetBatchSize, SetLearningRate, StopTraining>;

// A visitor made of lambdas, one per action type: std::visit(Overloaded{...}, action).
template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
// C++20 deduces this for aggregates, but clang before 17 does not (the fuzz build uses clang 14).
template <typename... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

// "switch STAR@1", "resize 6", "batch 64", "lr 0.2", "stop (plateau)"
std::string describe(const Action& action);
// Canonical bytes of a list of actions, equal on two workers iff the lists are equal.
std::vector<std::byte> encode(const std::vector<Action>& actions);

// What a policy knows about the job at a hook.
struct TrainingState {
  std::int64_t step = 0;  // the step about to run (before_*) or just finished (after_*)
  std::int64_t epoch = 0;
  std::int64_t total_steps = 0;
  int rank = 0;
  int cluster_size = 0;
  int max_cluster_size = 0;  // what the world can hold (free slots / runners' capacity)
  std::vector<int> host_of;  // host index of every rank
  std::string strategy;      // the current strategy's name
  StrategyName configured_strategy = StrategyName::automatic;  // the job's configured strategy
  int batch_per_worker = 0;
  double learning_rate = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual std::string name() const = 0;

  virtual void before_train(const TrainingState&) {}
  virtual void before_epoch(const TrainingState&) {}
  virtual void before_step(const TrainingState&) {}
  // This worker's contribution to the cluster-wide sums after_step receives (an interference
  // vote, its throughput, ...). The same length on every worker, every step.
  virtual std::vector<double> contribute(const StepMetrics& /*local*/, const TrainingState&) {
    return {};
  }
  // After every step. `sums` are this policy's contributions summed over all workers: identical
  // everywhere. Append actions; decide only from sums, state and own saved history.
  virtual void after_step(const StepMetrics& local, std::span<const double> sums,
                          const TrainingState& state, std::vector<Action>& actions) = 0;
  virtual void after_epoch(const TrainingState&) {}
  virtual void after_train(const TrainingState&) {}
  // Told once the trainer has applied an action (any policy's), at the start of `state.step`.
  virtual void applied(const Action& /*action*/, const TrainingState& /*state*/) {}

  // History that decisions depend on, for workers that join later.
  virtual std::vector<double> save_state() const { return {}; }
  virtual void load_state(std::span<const double> /*state*/) {}
};

}  // namespace kf
