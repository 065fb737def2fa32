#include "policies/elastic_provisioning.h"

#include <algorithm>
#include <stdexcept>

namespace kf {

ElasticProvisioning::ElasticProvisioning(ElasticProvisioningOptions options) : options_(options) {
  if (options_.interval < 1)
    throw std::invalid_argument("elastic_provisioning: interval must be >= 1");
  if (options_.grow_by < 1)
    throw std::invalid_argument("elastic_provisioning: grow_by must be >= 1");
  if (options_.settle < 0 || options_.settle >= options_.interval)
    throw std::invalid_argument("elastic_provisioning: settle must be in [0, interval)");
  if (options_.threshold < 0)
    throw std::invalid_argument("elastic_provisioning: threshold must be >= 0");
}

// Each worker's samples over its whole step cycle (wall-clock time since its previous step ended,
// the policy round and whatever else runs between steps included): summed, the cluster's total
// throughput as the clock on the wall sees it. samples / step_seconds would leave out the time
// between steps and overrate sizes where that time is long.
std::vector<double> ElasticProvisioning::contribute(const StepMetrics& local,
                                                    const TrainingState& /*state*/) {
  const double seconds = local.period_seconds > 0 ? local.period_seconds : local.step_seconds;
  return {seconds > 0 ? static_cast<double>(local.samples) / seconds : 0.0};
}

void ElasticProvisioning::after_step(const StepMetrics& /*local*/, std::span<const double> sums,
                                     const TrainingState& state, std::vector<Action>& actions) {
  if (holding_) return;
  if (steps_at_size_++ >= options_.settle) {
    total_ += sums[0];
    ++measured_;
  }
  if (steps_at_size_ < options_.interval) return;
  const double mean = total_ / measured_;
  const int limit = options_.max_workers > 0
                        ? std::min(options_.max_workers, state.max_cluster_size)
                        : state.max_cluster_size;
  if (previous_ > 0 && mean <= previous_ * (1 + options_.threshold)) {
    holding_ = true;  // the last addition did not pay: give it back and stay
    actions.emplace_back(std::in_place_type<Resize>, Resize{.workers = previous_size_});
    return;
  }
  previous_ = mean;
  previous_size_ = state.cluster_size;
  const int next = std::min(state.cluster_size + options_.grow_by, limit);
  if (next == state.cluster_size) {
    holding_ = true;  // no room to grow: hold here
    return;
  }
  actions.emplace_back(std::in_place_type<Resize>, Resize{.workers = next});
}

void ElasticProvisioning::applied(const Action& action, const TrainingState& /*state*/) {
  if (!std::holds_alternative<Resize>(action)) return;
  steps_at_size_ = 0;
  total_ = 0;
  measured_ = 0;
}

std::vector<double> ElasticProvisioning::save_state() const {
  return {holding_ ? 1.0 : 0.0,
          static_cast<double>(steps_at_size_),
          total_,
          static_cast<double>(measured_),
          previous_,
          static_cast<double>(previous_size_)};
}

void ElasticProvisioning::load_state(std::span<const double> s) {
  if (s.size() != 6) throw std::invalid_argument("elastic_provisioning: bad saved state");
  holding_ = s[0] != 0;
  steps_at_size_ = static_cast<int>(s[1]);
  total_ = s[2];
  measured_ = static_cast<int>(s[3]);
  previous_ = s[4];
  previous_size_ = static_cast<int>(s[5]);
}

}  // namespace kf
