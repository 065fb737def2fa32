// Experiments: what one kfsim invocation runs. A scenario is one run, or several: one per value of
// its `sweep:` (OUT/KEY=VALUE/ and OUT/sweep.csv), one per arm of its `variants:` (OUT/NAME/,
// OUT/summary.json and OUT/variants.csv), or each of those in several worlds side by side
// (--compare: OUT[/ARM]/WORLD/ and compare.csv). With `seeds: N` > 1 every arm runs N times
// (ARM/seed=S/) and the tables summarize each figure over the seeds; --jobs runs the independent
// runs in worker processes (sim/parallel_runs.h), --slurm as a Slurm job array (sim/slurm.h).
// An experiment of more than one run keeps a manifest and a marker per finished run
// (sim/experiment_plan.h): run again into the same directory, it runs only what is missing.
// What the terminal shows (progress, summaries, tables) comes from sim/report.h; the records are
// the same with or without it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"
#include "sim/simulation.h"

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
  // Independent runs (arms x seeds) in this many worker processes at once (--jobs); the records
  // are the same for every value. --compare runs in sequence.
  int jobs = 1;
  bool fresh = false;  // --fresh: run everything again, even runs whose records are complete
  // --slurm: submit the runs still to do as one Slurm job array, then (unless `slurm_wait` is
  // false: --no-wait) wait for it and collect the records.
  bool slurm = false;
  bool slurm_wait = true;
  std::vector<std::string> sbatch_args;  // passed to sbatch after kfsim's own options
};

// Runs one scenario into `out`. 0 when it ran as planned, 1 when it ended with errors that no
// injected failure explains. `summary` (optional) receives its summary.json.
int run_scenario(const Scenario& scenario, const std::string& out, bool quiet,
                 nlohmann::json* summary = nullptr);

// run_scenario with its progress reported to `progress` and `simulated` called once the simulation
// ends, before the records are written (a progress bar ends its line there).
int run_reporting(const Scenario& scenario, const std::string& out, bool quiet,
                  nlohmann::json* summary,
                  const std::function<void(const SimulationProgress&)>& progress,
                  const std::function<void()>& simulated);

// Runs the whole experiment: every arm at `seeds` seeds (seed, seed + 1, ...; with more than one,
// each into ARM/seed=S/ and the figures summarized over them, sim/seed_summary.h): 0, or 1 when any
// run ended with unexplained errors. Throws ScenarioError for a bad arm and std::runtime_error for
// records it cannot write.
// Throws ExperimentError (sim/experiment_plan.h) for --slurm without sbatch on PATH.
int run_experiment(const Scenario& scenario, const ExperimentOptions& options);

// kfsim --collect DIR: merges the finished runs of the experiment in `dir` into the tables a local
// run writes. 0 or 1 as run_experiment; 1 too, with each missing run named, while any run of the
// plan has no complete records. Throws ExperimentError when `dir` holds no experiment or its
// scenario file changed since it was planned.
int collect_experiment(const std::string& dir, bool quiet);

// kfsim --run-task DIR INDEX (what a Slurm array task runs): run INDEX of the experiment in `dir`.
// Throws ExperimentError as collect_experiment, for an index outside the plan, and when this
// kfsim is not the build that planned the experiment.
int run_experiment_task(const std::string& dir, std::size_t index, bool quiet);

}  // namespace kf
