// adaptive_strategy: the paper's Fig. 5 policy. Every worker watches its collective throughput
// (InterferenceDetector: reference window, threshold, hysteresis); votes are summed by the
// runner's allreduce; on a majority every worker switches, at the same step, to an alternative:
// a star rooted at another worker (away from a contended master), the minimum spanning tree of
// measured latencies, or a listed fallback strategy. With switch_back, it probes the original
// strategy every probe_every steps and stays on it once a majority sees its throughput back.
#pragma once

#include <optional>

#include "policies/policy.h"
#include "runtime/interference.h"

namespace kf {

struct AdaptiveStrategyOptions {
  InterferenceOptions detection;
  enum class Alternative { rerooted_star, mst, fallback } alternative = Alternative::rerooted_star;
  std::optional<StrategyName> fallback;  // for Alternative::fallback
  bool switch_back = false;
  int probe_every = 20;  // steps on the alternative between probes of the original
};

class AdaptiveStrategy final : public Policy {
 public:
  explicit AdaptiveStrategy(AdaptiveStrategyOptions options);
  std::string name() const override { return "adaptive_strategy"; }

  std::vector<double> contribute(const StepMetrics& local, const TrainingState& state) override;
  void after_step(const StepMetrics& local, std::span<const double> sums,
                  const TrainingState& state, std::vector<Action>& actions) override;
  void applied(const Action& action, const TrainingState& state) override;
  std::vector<double> save_state() const override;
  void load_state(std::span<const double> state) override;

  // Every worker's latencies (MST needs them): the runner sums rows into the matrix.
  bool needs_latencies() const { return options_.alternative == AdaptiveStrategyOptions::Alternative::mst; }

 private:
  enum class Phase { watching, switched, probing };
  SwitchStrategy alternative(const StepMetrics& local, std::span<const double> latency_sums,
                             const TrainingState& state) const;

  AdaptiveStrategyOptions options_;
  InterferenceDetector detector_;
  Phase phase_ = Phase::watching;
  int steps_switched_ = 0;
  std::optional<double> original_reference_;  // this worker's, from before the switch
  SwitchStrategy chosen_;                     // the alternative in use (for re-switching)
  std::optional<SwitchStrategy> original_;    // what to probe
};

}  // namespace kf
