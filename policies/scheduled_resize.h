// scheduled_resize: resize the cluster at given steps ("100:8,200:4" = 8 workers from step 100
// on, 4 from step 200 on). For experiments that need a known membership timeline.
#pragma once

#include <map>
#include <string_view>

#include "policies/policy.h"

namespace kf {

class ScheduledResize final : public Policy {
 public:
  explicit ScheduledResize(std::map<std::int64_t, int> schedule);
  // "step:size,step:size"; throws std::invalid_argument naming the bad entry.
  static std::map<std::int64_t, int> parse(std::string_view text);
  std::string name() const override { return "scheduled_resize"; }
  void after_step(const StepMetrics& local, std::span<const double> sums,
                  const TrainingState& state, std::vector<Action>& actions) override;

 private:
  std::map<std::int64_t, int> schedule_;
};

}  // namespace kf
