#include "policies/adaptive_batch_size.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kf {

AdaptiveBatchSize::AdaptiveBatchSize(AdaptiveBatchSizeOptions options) : options_(options) {
  if (options_.interval < 1) throw std::invalid_argument("adaptive_batch_size: interval must be >= 1");
  if (options_.min_batch < 1 || options_.max_batch < options_.min_batch)
    throw std::invalid_argument("adaptive_batch_size: needs 1 <= min_batch <= max_batch");
  if (!(options_.scale > 0)) throw std::invalid_argument("adaptive_batch_size: scale must be > 0");
  if (options_.lr_rule != "linear" && options_.lr_rule != "sqrt" && options_.lr_rule != "none")
    throw std::invalid_argument("adaptive_batch_size: lr_rule is linear, sqrt or none");
  if (options_.min_change < 0) throw std::invalid_argument("adaptive_batch_size: min_change must be >= 0");
}

void AdaptiveBatchSize::before_train(const TrainingState& state) {
  if (base_batch_ == 0) {
    base_batch_ = state.batch_per_worker;
    base_lr_ = state.learning_rate;
  }
}

std::vector<double> AdaptiveBatchSize::contribute(const StepMetrics& local, const TrainingState&) {
  const auto gns = local.values.find("gns");
  if (gns == local.values.end()) return {0.0, 0.0};
  return {gns->second, 1.0};
}

void AdaptiveBatchSize::after_step(const StepMetrics& /*local*/, std::span<const double> sums,
                                   const TrainingState& state, std::vector<Action>& actions) {
  if ((state.step + 1) % options_.interval != 0 || sums.size() < 2 || sums[1] <= 0) return;
  const double gns = sums[0] / sums[1];
  const double per_worker = options_.scale * gns / state.cluster_size;
  const int target = std::clamp(static_cast<int>(std::lround(per_worker)), options_.min_batch,
                                options_.max_batch);
  const int current = state.batch_per_worker;
  if (std::abs(target - current) <= options_.min_change * current) return;
  actions.emplace_back(std::in_place_type<SetBatchSize>, SetBatchSize{.per_worker = target});
  if (options_.lr_rule == "none" || base_batch_ <= 0) return;
  const double ratio = target / base_batch_;
  const double lr = base_lr_ * (options_.lr_rule == "linear" ? ratio : std::sqrt(ratio));
  actions.emplace_back(std::in_place_type<SetLearningRate>, SetLearningRate{.value = lr});
}

void AdaptiveBatchSize::load_state(std::span<const double> s) {
  if (s.size() != 2) throw std::invalid_argument("adaptive_batch_size: bad saved state");
  base_batch_ = s[0];
  base_lr_ = s[1];
}

}  // namespace kf
