// Writing a model profile as a profile file (the schema read by sim/scenario/profile_file.h), so a
// shipped model can start a user's own: `kfsim --write-profile MODEL`, and the copies shipped in
// workloads/profiles/.
#pragma once

#include <string>
#include <string_view>

#include "workloads/model.h"

namespace kf {

// The profile file that load_profile reads back as `model`: the same name, layers, tensors (names,
// element counts, order), FLOPs per layer (shortest decimals that read back as the same doubles)
// and measured times (in ns). A layer whose only tensor bears its name is written with
// `parameters`, any other with `tensors`. Each line of `comment` heads the file as a # comment.
// Throws std::invalid_argument for a model without layers (a synthetic `tensors` workload).
std::string write_profile(const ModelProfile& model, std::string_view comment = {});

// The shipped model `name` (workloads/model.h) as workloads/profiles/NAME.yaml holds it: its
// profile, headed by a comment saying where it comes from. Throws std::invalid_argument for an
// unknown name, naming the known ones.
std::string shipped_profile(std::string_view name);

}  // namespace kf
