// kfsim: run a scenario file in the simulated world and write its records.
//
//   kfsim FILE [--out DIR] [--seed N] [--set key.path=value ...] [--quiet] [--plot]
//   kfsim FILE --seeds 5 --jobs 2    every arm at seeds seed..seed+4, two runs at a time
//   kfsim FILE --world flow          the flow-level world instead of the file's `world:`
//   kfsim FILE --compare ns3,flow    run both, report per-step time differences (OUT/compare.csv)
//   kfsim FILE --slurm [--no-wait] [-- SBATCH OPTIONS]
//                                    the runs as one Slurm job array, then collect them
//   kfsim --collect DIR              merge the finished runs of the experiment in DIR
//   kfsim --write-profile MODEL      print a shipped model as a profile file (workload.profile)
//
// A file with `sweep:` runs once per value (OUT/KEY=VALUE/, OUT/sweep.csv); one with `variants:`
// runs each named arm (OUT/NAME/) and compares them (OUT/summary.json, OUT/variants.csv). With
// `seeds: N` > 1 each arm runs N times (ARM/seed=S/) and the tables give means and 95% intervals.
// An experiment of several runs run again into the same directory runs only what is missing
// (--fresh: everything). Exit codes: 0 done, 1 a run failed (or --collect: runs are missing),
// 2 a bad scenario file, flag or experiment directory.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "sim/experiment.h"
#include "sim/experiment_plan.h"
#include "sim/plot.h"
#include "sim/scenario/profile_writer.h"
#include "sim/torch/torch_task.h"

namespace {

// Runs an experiment step and maps what it throws to kfsim's exit codes: 2 for bad input (a
// scenario, an experiment directory or a torch task module that cannot be used, with the message
// naming the place), 1 for anything else that went wrong.
template <typename Run>
int exit_code_of(Run&& run) {
  try {
    return run();
  } catch (const kf::ScenarioError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const kf::ExperimentError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const kf::TorchTaskError& e) {  // workload.torch: the user's task module
    fmt::print(stderr, "kfsim: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kfsim: {}\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kfsim: run a KungFu testbed scenario in the simulated world"};
  kf::ExperimentOptions options;
  std::optional<std::uint64_t> seed;
  app.add_option("file", options.file, "scenario YAML file");
  std::vector<std::string> rest;
  app.add_option("sbatch", rest, "with --slurm, after --: options for sbatch");
  app.add_option("--out", options.out, "directory for the records (default: out/<scenario name>)");
  app.add_option("--seed", seed, "override the scenario's seed");
  std::optional<int> seeds;
  app.add_option("--seeds", seeds, "run every arm at this many seeds (the scenario's `seeds`)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  auto* jobs =
      app.add_option("--jobs", options.jobs, "independent runs in this many worker processes")
          ->check(CLI::Range(1, 1024));
  app.add_option("--set", options.overrides, "override a key, e.g. --set steps=20 (repeatable)");
  app.add_flag("-q,--quiet", options.quiet, "no progress bar and no summary table");
  app.add_flag("--fresh", options.fresh,
               "run every run again, even those whose records in --out are complete");
  bool plot = false;
  app.add_flag("--plot", plot, "then plot the records (analysis/plot.py: PNG + PDF beside them)");
  std::string world;
  std::vector<std::string> compare;
  app.add_option("--world", world, "the simulated world: ns3 (packet level) or flow (fluid)");
  auto* compare_opt =
      app.add_option("--compare", compare,
                     "run in each world (e.g. ns3,flow) and compare per-step times with the first")
          ->delimiter(',')
          ->excludes("--world");
  auto* slurm = app.add_flag("--slurm", options.slurm,
                             "submit the runs as one Slurm job array (sbatch), wait, collect")
                    ->excludes(jobs)
                    ->excludes(compare_opt);
  bool no_wait = false;
  app.add_flag("--no-wait", no_wait, "with --slurm: return once submitted")->needs(slurm);
  std::string collect;
  auto* collect_opt = app.add_option("--collect", collect,
                                     "merge the finished runs of the experiment in this directory");
  std::vector<std::string> run_task;
  app.add_option("--run-task", run_task, "DIR INDEX: run one run of DIR's experiment (Slurm)")
      ->expected(2)
      ->excludes(collect_opt);
  std::string write_profile;
  app.add_option("--write-profile", write_profile,
                 "print the shipped MODEL as a profile file (workload.profile) and exit")
      ->excludes("file")
      ->excludes(collect_opt);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (!write_profile.empty()) {
    try {
      fmt::print("{}", kf::shipped_profile(write_profile));
      return 0;
    } catch (const std::invalid_argument& e) {
      fmt::print(stderr, "kfsim --write-profile: {}\n", e.what());
      return 2;
    }
  }
  options.slurm_wait = !no_wait;
  options.sbatch_args = rest;
  const bool other_mode = !collect.empty() || !run_task.empty();
  if (other_mode == !options.file.empty() || (!rest.empty() && !options.slurm)) {
    fmt::print(stderr, "kfsim: {}\nRun with --help for more information.\n",
               !rest.empty() && !options.slurm
                   ? "arguments after the scenario file are sbatch options and need --slurm"
                   : "give one scenario FILE, or --collect DIR, or --run-task DIR INDEX");
    return 2;
  }
  if (!collect.empty()) {
    return exit_code_of([&] {
      const int code = kf::collect_experiment(collect, options.quiet);
      return plot ? std::max(code, kf::plot_records(collect, options.quiet)) : code;
    });
  }
  if (!run_task.empty()) {
    std::size_t used = 0;
    unsigned long index = 0;
    try {
      index = std::stoul(run_task[1], &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != run_task[1].size()) {
      fmt::print(stderr, "kfsim --run-task: INDEX must be a run's number, not '{}'\n", run_task[1]);
      return 2;
    }
    return exit_code_of([&] { return kf::run_experiment_task(run_task[0], index, options.quiet); });
  }

  kf::Scenario scenario;
  try {
    if (seed) options.overrides.push_back(fmt::format("seed={}", *seed));
    if (seeds) options.overrides.push_back(fmt::format("seeds={}", *seeds));
    if (!world.empty()) options.overrides.push_back("world=" + world);
    // Every world named must be one the scenario may name.
    for (const auto& w : compare) {
      auto o = options.overrides;
      o.push_back("world=" + w);
      options.compare.push_back(kf::load_scenario(options.file, o).world);
    }
    scenario = kf::load_scenario(options.file, options.overrides);
  } catch (const kf::ScenarioError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  if (!options.compare.empty() && scenario.seeds > 1) {
    fmt::print(stderr, "kfsim: --compare runs one seed; the scenario asks for seeds: {}\n",
               scenario.seeds);
    return 2;
  }
  if (options.out.empty()) options.out = "out/" + scenario.name;
  return exit_code_of([&] {
    const int code = kf::run_experiment(scenario, options);
    return plot ? std::max(code, kf::plot_records(options.out, options.quiet)) : code;
  });
}
