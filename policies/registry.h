// Policies by name, for the scenario's `policy:` section, kfrun's -policy flag and programs that
// configure policies from text. A new policy is one more entry in registry.cc.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policies/policy.h"

namespace kf {

struct PolicySpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> params;  // in the order given
};

// Throws std::invalid_argument naming the policy and the parameter: an unknown policy (listing
// the known ones), an unknown parameter (listing the accepted ones), a value of the wrong form.
std::unique_ptr<Policy> make_policy(const PolicySpec& spec);
std::vector<std::string> policy_names();

// "adaptive_strategy:threshold=0.8,window=3" or just "adaptive_strategy". A value may not
// contain ',' except scheduled_resize's schedule, which takes the rest: "scheduled_resize:
// schedule=10:4,20:2".
PolicySpec parse_policy_flag(std::string_view text);

}  // namespace kf
