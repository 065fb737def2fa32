// elastic_provisioning: the paper's Fig. 6 policy. Start small, add `grow_by` workers every
// `interval` steps while the cluster's total throughput (samples/s, summed over workers by the
// runner) improves by more than `threshold` over the previous size; when it does not, drop the
// last addition and hold that size for the rest of the run. The first `settle` steps after each
// resize are not measured (new workers are syncing and warming up; the first step's cycle also
// holds the resize itself). Throughput is over wall-clock time: each worker's samples over the
// time since its previous step ended (StepMetrics::period_seconds), the mean over the measured
// steps of their sum.
#pragma once

#include <optional>

#include "policies/policy.h"

namespace kf {

struct ElasticProvisioningOptions {
  int interval = 10;  // steps measured at each size
  int grow_by = 1;
  double threshold = 0.05;  // a 5% gain in total throughput keeps growing
  int settle = 2;
  int max_workers = 0;  // 0: as many as the world holds
};

class ElasticProvisioning final : public Policy {
 public:
  explicit ElasticProvisioning(ElasticProvisioningOptions options);
  std::string name() const override { return "elastic_provisioning"; }
  std::vector<double> contribute(const StepMetrics& local, const TrainingState& state) override;
  void after_step(const StepMetrics& local, std::span<const double> sums,
                  const TrainingState& state, std::vector<Action>& actions) override;
  void applied(const Action& action, const TrainingState& state) override;
  std::vector<double> save_state() const override;
  void load_state(std::span<const double> state) override;

 private:
  ElasticProvisioningOptions options_;
  bool holding_ = false;
  int steps_at_size_ = 0;
  double total_ = 0;  // summed throughput over the measured steps at this size
  int measured_ = 0;
  double previous_ = 0;  // mean total throughput at the previous size (0: none yet)
  int previous_size_ = 0;
};

}  // namespace kf
