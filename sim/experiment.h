// Experiments: what one kfsim invocation runs. A scenario is one run, or several: one per value of
// its `sweep:` (OUT/KEY=VALUE/ and OUT/sweep.csv), one per arm of its `variants:` (OUT/NAME/,
// OUT/summary.json and OUT/variants.csv), or each of those in several worlds side by side
// (--compare: OUT[/ARM]/WORLD/ and compare.csv). What the terminal shows (progress, summaries,
// tables) comes from sim/report.h; the records are the same with or without it.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"

namespace kf {

// One run of an experiment: where its records go (under the experiment's directory; empty: the
// directory itself), the swept value or the variant's name, and the scenario it runs.
struct Arm {
  std::string dir;
  std::string label;
  std::vector<std::string> overrides;  // a variant's, as its file gave them
  Scenario scenario;
};

// The runs `scenario` stands for: each arm of its variants, each value of its sweep (the file
// loaded again with KEY=VALUE after `overrides`), or itself. Throws ScenarioError for a value the
// swept key does not take.
std::vector<Arm> expand_arms(const Scenario& scenario, const std::string& file,
                             const std::vector<std::string>& overrides);

struct ExperimentOptions {
  std::string file;                    // the scenario file, to load a sweep's values
  std::vector<std::string> overrides;  // --set, --seed, --world as "key=value"
  std::string out;                     // the experiment's directory
  bool quiet = false;                  // no progress bar, summaries or tables
  std::vector<WorldKind> compare;      // two or more: run every arm in each (--compare)
};

// Runs one scenario into `out`. 0 when it ran as planned, 1 when it ended with errors that no
// injected failure explains. `summary` (optional) receives its summary.json.
int run_scenario(const Scenario& scenario, const std::string& out, bool quiet,
                 nlohmann::json* summary = nullptr);

// Runs the whole experiment: 0, or 1 when any run ended with unexplained errors. Throws
// ScenarioError for a bad arm and std::runtime_error for records it cannot write.
int run_experiment(const Scenario& scenario, const ExperimentOptions& options);

}  // namespace kf
