#include "policies/adaptive_strategy.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "topology/forest.h"

namespace kf {

AdaptiveStrategy::AdaptiveStrategy(AdaptiveStrategyOptions options)
    : options_(std::move(options)), detector_(options_.detection) {
  if (options_.alternative == AdaptiveStrategyOptions::Alternative::fallback && !options_.fallback)
    throw std::invalid_argument(
        "adaptive_strategy: alternative 'fallback' needs a fallback strategy");
  if (options_.probe_every < 1)
    throw std::invalid_argument("adaptive_strategy: probe_every must be >= 1");
}

std::vector<double> AdaptiveStrategy::contribute(const StepMetrics& local,
                                                 const TrainingState& state) {
  double vote = 0;
  switch (phase_) {
    case Phase::watching:
      vote = detector_.observe(local.collective_throughput) ? 1 : 0;
      break;
    case Phase::switched:
      break;
    case Phase::probing:  // the step just run was on the original: is it back?
      vote = original_reference_ && local.collective_throughput >=
                                        options_.detection.clear_threshold * *original_reference_
                 ? 1
                 : 0;
      break;
  }
  std::vector<double> out{vote};
  if (needs_latencies()) {
    // Row `rank` of the latency matrix; the allreduce's sum assembles the whole matrix.
    const auto n = static_cast<std::size_t>(state.cluster_size);
    out.resize(1 + n * n, 0.0);
    const std::size_t row = 1 + static_cast<std::size_t>(state.rank) * n;
    std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(row), n, -1.0);  // < 0: not measured
    for (const auto& [peer, seconds] : local.latency_seconds) {
      if (static_cast<std::size_t>(peer) < n) out[row + static_cast<std::size_t>(peer)] = seconds;
    }
  }
  return out;
}

SwitchStrategy AdaptiveStrategy::alternative(const StepMetrics& /*local*/,
                                             std::span<const double> sums,
                                             const TrainingState& state) const {
  const int n = state.cluster_size;
  switch (options_.alternative) {
    case AdaptiveStrategyOptions::Alternative::rerooted_star: {
      // The current strategy's root is the contended master; KungFu's answer is a star elsewhere.
      const Strategy current = make_strategy(state.configured_strategy, state.host_of);
      const int root = current.pairs.front().root();
      const int next = (root + 1) % n;
      std::vector<int> forest(static_cast<std::size_t>(n), next);
      return {.forest = forest, .label = fmt::format("STAR@{}", next)};
    }
    case AdaptiveStrategyOptions::Alternative::mst: {
      const auto un = static_cast<std::size_t>(n);
      std::vector<std::vector<double>> latency(un, std::vector<double>(un, 0.0));
      for (std::size_t a = 0; a < un; ++a) {
        for (std::size_t b = 0; b < un; ++b) {
          // Symmetric: the worse of the two directions' measurements; unmeasured counts as 0.
          const double ab = sums[1 + a * un + b], ba = sums[1 + b * un + a];
          latency[a][b] = std::max({ab, ba, 0.0});
        }
      }
      return {.forest = minimum_spanning_tree(latency), .label = "MST"};
    }
    case AdaptiveStrategyOptions::Alternative::fallback:
      return {.name = options_.fallback, .label = std::string(strategy_name(*options_.fallback))};
  }
  throw std::logic_error("adaptive_strategy: unknown alternative");
}

void AdaptiveStrategy::after_step(const StepMetrics& local, std::span<const double> sums,
                                  const TrainingState& state, std::vector<Action>& actions) {
  const bool majority = sums.size() > 0 && sums[0] * 2 > state.cluster_size;
  switch (phase_) {
    case Phase::watching:
      if (majority) {
        chosen_ = alternative(local, sums, state);
        original_ = SwitchStrategy{.name = state.configured_strategy,
                                   .label = std::string(strategy_name(state.configured_strategy))};
        original_reference_ = detector_.reference();
        actions.push_back(chosen_);
      }
      break;
    case Phase::switched:
      if (options_.switch_back && ++steps_switched_ >= options_.probe_every && original_) {
        SwitchStrategy probe = *original_;
        probe.label += " (probe)";
        actions.push_back(probe);
      }
      break;
    case Phase::probing:
      if (majority) {
        phase_ = Phase::watching;  // the original is good again: stay, watch afresh
      } else {
        actions.push_back(chosen_);  // still contended: back to the alternative
      }
      break;
  }
}

void AdaptiveStrategy::applied(const Action& action, const TrainingState& /*state*/) {
  if (std::holds_alternative<Resize>(action)) {
    // A new cluster starts on the configured strategy; the alternative was for the old one.
    phase_ = Phase::watching;
    detector_.reset();
    return;
  }
  const auto* s = std::get_if<SwitchStrategy>(&action);
  if (s == nullptr) return;
  // Whatever switched, throughput from before is no reference for what follows.
  if (phase_ == Phase::watching && s->label == chosen_.label) {
    phase_ = Phase::switched;
    steps_switched_ = 0;
  } else if (phase_ == Phase::switched && s->label.ends_with("(probe)")) {
    phase_ = Phase::probing;
  } else if (phase_ == Phase::probing && s->label == chosen_.label) {
    phase_ = Phase::switched;
    steps_switched_ = 0;
  }
  detector_.reset();
}

std::vector<double> AdaptiveStrategy::save_state() const {
  return {static_cast<double>(phase_), static_cast<double>(steps_switched_)};
}

void AdaptiveStrategy::load_state(std::span<const double> state) {
  if (state.size() != 2) throw std::invalid_argument("adaptive_strategy: bad saved state");
  phase_ = static_cast<Phase>(static_cast<int>(state[0]));
  steps_switched_ = static_cast<int>(state[1]);
}

}  // namespace kf
