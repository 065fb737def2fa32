// Fidelity check between simulated worlds: the same scenario (same seed, same jitter draws) run
// once per world, and its per-step times set side by side against the first world's
// (`kfsim --compare ns3,flow FILE`).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"

namespace kf {

struct WorldRun {
  WorldKind world = WorldKind::ns3;
  std::vector<double> step_seconds;  // per cluster step, in step order
  double wall_seconds = 0;
  double learning_wall_seconds = 0;  // of wall_seconds, the learning (the same in any world)
  nlohmann::json summary;
};

struct Comparison {
  std::vector<WorldRun> runs;  // runs[0] is the reference
  // For each other world (index i - 1 for runs[i]): |step time / reference - 1| over the steps
  // both completed, in percent; and the mean step time's relative difference, in percent.
  std::vector<double> mean_abs_pct;
  std::vector<double> max_abs_pct;
  std::vector<double> mean_step_pct;
  std::vector<double> speedup;  // reference wall time / this world's
  // The same, each wall time less its learning arithmetic: the worlds' own costs. Equal to
  // speedup when the workload has no numeric model.
  std::vector<double> world_speedup;
};

// The mean of a run's step times; 0 without steps.
double mean_step_seconds(const WorldRun& run);

// Runs `scenario` in each of `worlds` (records into `out`/WORLD/), then writes `out`/compare.csv:
// step, then per world its step time in seconds, then per other world its difference from the
// first in percent. Throws std::invalid_argument for fewer than two worlds.
Comparison compare_worlds(const Scenario& scenario, const std::vector<WorldKind>& worlds,
                          const std::string& out);

}  // namespace kf
