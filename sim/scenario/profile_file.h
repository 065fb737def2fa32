// Model profile files (`workload: {profile: FILE}`): a user's own model as per-layer parameters and
// costs, read as strictly as a scenario file (errors at FILE:LINE:COL). The format is documented in
// docs/scenarios.md (workload.profile); tests/data/profiles/ has examples.
#pragma once

#include <string>

#include "workloads/model.h"

namespace kf {

// Reads and validates the profile at `path`. Each layer becomes one gradient tensor of its
// `parameters`, or the tensors its `tensors` list names. Throws ScenarioError
// (sim/scenario/scenario.h).
ModelProfile load_profile(const std::string& path);

// The same from YAML text; `file` is used in error messages.
ModelProfile parse_profile(const std::string& yaml_text, const std::string& file);

}  // namespace kf
