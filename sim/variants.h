// Comparing the arms of a scenario's `variants:` (the paper's Fig. 4: fixed small, fixed large
// and adaptive batch size on one task): each arm's time to the target accuracy, accuracy, batch
// and simulated time side by side, and which arm reached the target first. kfsim runs the arms;
// this only reads their summaries, so the verdict is whatever the runs measured.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"

namespace kf {

struct VariantRun {
  std::string name;
  std::vector<std::string> overrides;  // "key.path=value", as the file gave them
  nlohmann::json summary;              // the arm's own summary.json
};

// {"scenario", "seed", "variants": [{name, overrides, workers, steps, batch_per_worker,
// final_batch_per_worker, simulation_end_s, throughput_samples_per_s, target_accuracy,
// time_to_target {step, time_s} or null, final_accuracy, best_accuracy, errors}, ...],
// "first_to_target": the name of the arm that reached its target at the earliest simulated time
// (on a tie the one listed first; null when none did), "ranking": every name, those that reached
// the target by time, then the rest in file order}.
nlohmann::json compare_variants(const Scenario& scenario, const std::vector<VariantRun>& runs);

// The comparison as a table for the terminal.
std::string variants_table(const nlohmann::json& comparison);

// OUT/summary.json (the comparison) and OUT/variants.csv (a row per variant). Throws
// std::runtime_error when a file cannot be written.
void write_variants(const std::string& out, const nlohmann::json& comparison);

}  // namespace kf
