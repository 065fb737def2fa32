// kfsim: run a scenario file in the simulated world and write its records.
//
//   kfsim FILE [--out DIR] [--seed N] [--set key.path=value ...] [--quiet] [--plot]
//   kfsim FILE --seeds 5 --jobs 2    every arm at seeds seed..seed+4, two runs at a time
//   kfsim FILE --world flow          the flow-level world instead of the file's `world:`
//   kfsim FILE --compare ns3,flow    run both, report per-step time differences (OUT/compare.csv)
//
// A file with `sweep:` runs once per value (OUT/KEY=VALUE/, OUT/sweep.csv); one with `variants:`
// runs each named arm (OUT/NAME/) and compares them (OUT/summary.json, OUT/variants.csv). With
// `seeds: N` > 1 each arm runs N times (ARM/seed=S/) and the tables give means and 95% intervals.
// Exit codes: 0 done, 1 the run failed, 2 a bad scenario file or flag.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <limits>
#include <optional>

#include "sim/experiment.h"
#include "sim/plot.h"

int main(int argc, char** argv) {
  CLI::App app{"kfsim: run a KungFu testbed scenario in the simulated world"};
  kf::ExperimentOptions options;
  std::optional<std::uint64_t> seed;
  app.add_option("file", options.file, "scenario YAML file")->required();
  app.add_option("--out", options.out, "directory for the records (default: out/<scenario name>)");
  app.add_option("--seed", seed, "override the scenario's seed");
  std::optional<int> seeds;
  app.add_option("--seeds", seeds, "run every arm at this many seeds (the scenario's `seeds`)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  app.add_option("--jobs", options.jobs, "independent runs in this many worker processes at once")
      ->check(CLI::Range(1, 1024));
  app.add_option("--set", options.overrides, "override a key, e.g. --set steps=20 (repeatable)");
  app.add_flag("-q,--quiet", options.quiet, "no progress bar and no summary table");
  bool plot = false;
  app.add_flag("--plot", plot, "then plot the records (analysis/plot.py: PNG + PDF beside them)");
  std::string world;
  std::vector<std::string> compare;
  app.add_option("--world", world, "the simulated world: ns3 (packet level) or flow (fluid)");
  app.add_option("--compare", compare,
                 "run in each world (e.g. ns3,flow) and compare per-step times with the first")
      ->delimiter(',')
      ->excludes("--world");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
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
  try {
    const int code = kf::run_experiment(scenario, options);
    return plot ? std::max(code, kf::plot_records(options.out, options.quiet)) : code;
  } catch (const kf::ScenarioError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kfsim: {}\n", e.what());
    return 1;
  }
}
