#include "sim/experiment.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "sim/compare.h"
#include "sim/parallel_runs.h"
#include "sim/report.h"
#include "sim/seed_summary.h"
#include "sim/simulation.h"
#include "sim/variants.h"

namespace kf {

std::vector<Arm> expand_arms(const Scenario& scenario, const std::string& file,
                             const std::vector<std::string>& overrides) {
  std::vector<Arm> arms;
  if (!scenario.variants.empty()) {
    for (const auto& v : scenario.variants)
      arms.push_back({v.name, v.name, v.overrides, *v.scenario});
    return arms;
  }
  if (!scenario.sweep) {
    arms.push_back({"", "", {}, scenario});
    return arms;
  }
  for (const auto& value : scenario.sweep->values) {
    auto o = overrides;
    o.push_back(scenario.sweep->key + "=" + value);
    Scenario s = load_scenario(file, o);
    s.sweep.reset();
    std::string dir = scenario.sweep->key + "=" + value;
    std::replace(dir.begin(), dir.end(), '/', '_');
    arms.push_back({std::move(dir), value, {}, std::move(s)});
  }
  return arms;
}

int run_scenario(const Scenario& scenario, const std::string& out, bool quiet,
                 nlohmann::json* summary_out) {
  ProgressBar bar(!quiet && isatty(STDERR_FILENO));
  const int code = run_reporting(
      scenario, out, quiet, summary_out, [&bar](const SimulationProgress& p) { bar.update(p); },
      [&bar] { bar.done(); });
  return code;
}

int run_reporting(const Scenario& scenario, const std::string& out, bool quiet,
                  nlohmann::json* summary_out,
                  const std::function<void(const SimulationProgress&)>& progress,
                  const std::function<void()>& simulated) {
  Simulation sim(scenario);
  sim.run(progress);
  if (simulated) simulated();
  sim.write(out);
  const auto summary = sim.summary();
  if (summary_out != nullptr) *summary_out = summary;
  if (!quiet) print_summary(summary, sim.perf(), out);
  // Errors are the expected outcome of an injected failure; otherwise the run failed.
  const bool failure_injected =
      std::any_of(scenario.events.begin(), scenario.events.end(),
                  [](const ScenarioEvent& e) { return std::holds_alternative<FailEvent>(e.what); });
  if (!summary["errors"].empty() && !failure_injected) {
    fmt::print(stderr, "kfsim: the run ended with errors (see {}/summary.json)\n", out);
    return 1;
  }
  return 0;
}

namespace {

// --compare: every arm in every world, per-step times side by side; OUT/compare.csv lists the arms
// when there are several.
int run_compare(const Scenario& scenario, const ExperimentOptions& o) {
  const std::vector<Arm> arms = expand_arms(scenario, o.file, o.overrides);
  std::ofstream table;
  if (scenario.sweep || !scenario.variants.empty()) {
    std::filesystem::create_directories(o.out);
    table.open(o.out + "/compare.csv", std::ios::trunc);
    if (!table) throw std::runtime_error("cannot write " + o.out + "/compare.csv");
    table << "variant,world,mean_step_s,mean_abs_pct,max_abs_pct,mean_step_pct\n";
  }
  int worst = 0;
  for (const Arm& arm : arms) {
    const std::string where = arm.dir.empty() ? o.out : o.out + "/" + arm.dir;
    const Comparison c = compare_worlds(arm.scenario, o.compare, where);
    if (!o.quiet) print_comparison(c, arm.scenario, arm.dir, where, o.compare);
    for (std::size_t i = 0; i < c.runs.size(); ++i) {
      const auto& r = c.runs[i];
      if (!r.summary["errors"].empty()) worst = 1;
      if (!table.is_open()) continue;
      const auto pct = [&](const std::vector<double>& v) {
        return i > 0 ? fmt::format("{:.3f}", v[i - 1]) : std::string();
      };
      table << fmt::format("{},{},{:.9f},{},{},{}\n", arm.dir, option_name(r.world),
                           mean_step_seconds(r), pct(c.mean_abs_pct), pct(c.max_abs_pct),
                           pct(c.mean_step_pct));
    }
  }
  return worst;
}

// One run of the experiment: arm `arm` at `seed`, into `dir`.
struct PlannedRun {
  std::size_t arm = 0;
  std::uint64_t seed = 0;
  std::string dir;
  Scenario scenario;
};

// Every arm at `seeds` seeds, arm by arm and seed by seed: the order the records are merged in.
// Run k of an arm runs at the arm's seed + k; with more than one seed each run goes into
// ARM_DIR/seed=S/.
std::vector<PlannedRun> plan_runs(const std::vector<Arm>& arms, int seeds, const std::string& out) {
  std::vector<PlannedRun> runs;
  for (std::size_t a = 0; a < arms.size(); ++a) {
    const std::string base = arms[a].dir.empty() ? out : out + "/" + arms[a].dir;
    for (int k = 0; k < seeds; ++k) {
      PlannedRun r{a, arms[a].scenario.seed + static_cast<std::uint64_t>(k), base,
                   arms[a].scenario};
      r.scenario.seed = r.seed;
      if (seeds > 1) r.dir = fmt::format("{}/seed={}", base, r.seed);
      runs.push_back(std::move(r));
    }
  }
  return runs;
}

// What the terminal shows before a run in sequence: the arm, its overrides, its seed.
void print_header(const Scenario& scenario, const Arm& arm, const PlannedRun& run, int seeds) {
  const std::string seed = seeds > 1 ? fmt::format(" (seed {})", run.seed) : "";
  if (!scenario.variants.empty()) {
    std::string set;
    for (const auto& s : arm.overrides)
      set += (set.empty() ? "" : ", ") + s;
    fmt::print("\n== {}{}{}\n", arm.label, set.empty() ? "" : " (" + set + ")", seed);
  } else if (scenario.sweep) {
    fmt::print("\n== {} = {}{}\n", scenario.sweep->key, arm.label, seed);
  } else if (seeds > 1) {
    fmt::print("\n== seed {}\n", run.seed);
  }
}

nlohmann::json read_summary(const std::string& dir) {
  const std::string path = dir + "/summary.json";
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

// Runs `runs` in worker processes (--jobs): one progress bar for all, then the summaries read
// back from the records in plan order. A summary.json written by a child parses back to the
// values the run had, so what is merged is the same as in one process.
int run_in_workers(const std::vector<PlannedRun>& runs, const ExperimentOptions& o,
                   std::vector<nlohmann::json>& summaries) {
  std::vector<ParallelTask> tasks;
  for (const auto& r : runs) {
    tasks.emplace_back([&r](const ProgressFn& progress) {
      return run_reporting(r.scenario, r.dir, true, nullptr, progress, {});
    });
  }
  std::vector<SimulationProgress> progress(runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i)
    progress[i].steps_total = runs[i].scenario.steps;
  ProgressBar bar(!o.quiet && isatty(STDERR_FILENO));
  const auto codes = run_parallel(tasks, o.jobs, [&](std::size_t i, const SimulationProgress& p) {
    progress[i] = p;
    SimulationProgress all;
    for (const auto& q : progress) {
      all.steps_done += q.steps_done;
      all.steps_total += q.steps_total;
      all.simulated_seconds += q.simulated_seconds;
    }
    bar.update(all);
  });
  bar.done();
  int worst = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (codes[i] != 0 && codes[i] != 1)
      throw std::runtime_error("the run into " + runs[i].dir + " failed (see above)");
    worst = std::max(worst, codes[i]);
    summaries.push_back(read_summary(runs[i].dir));
    if (!o.quiet) {
      const auto& s = summaries.back();
      fmt::print("  {:<40} {:>10.1f} samples/s  {:>9.3f} simulated s\n", runs[i].dir,
                 s["throughput_samples_per_s"].get<double>(), s["simulation_end_s"].get<double>());
    }
  }
  return worst;
}

// Runs every planned run, in sequence or in worker processes, and returns their summaries in plan
// order.
int run_all(const Scenario& scenario, const std::vector<Arm>& arms,
            const std::vector<PlannedRun>& runs, const ExperimentOptions& o,
            std::vector<nlohmann::json>& summaries) {
  if (o.jobs > 1 && runs.size() > 1) return run_in_workers(runs, o, summaries);
  int worst = 0;
  for (const auto& r : runs) {
    if (!o.quiet) print_header(scenario, arms[r.arm], r, scenario.seeds);
    nlohmann::json summary;
    worst = std::max(worst, run_scenario(r.scenario, r.dir, o.quiet, &summary));
    summaries.push_back(std::move(summary));
  }
  return worst;
}

// The runs' summaries grouped by arm, for the statistics over seeds.
std::vector<SeededArm> by_arm(const std::vector<Arm>& arms, const std::vector<PlannedRun>& runs,
                              std::vector<nlohmann::json>& summaries) {
  std::vector<SeededArm> out(arms.size());
  for (std::size_t a = 0; a < arms.size(); ++a) {
    out[a].name = arms[a].label;
    out[a].overrides = arms[a].overrides;
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    out[runs[i].arm].seeds.push_back(runs[i].seed);
    out[runs[i].arm].summaries.push_back(std::move(summaries[i]));
  }
  return out;
}

}  // namespace

int run_experiment(const Scenario& scenario, const ExperimentOptions& o) {
  if (!o.compare.empty()) return run_compare(scenario, o);
  const std::vector<Arm> arms = expand_arms(scenario, o.file, o.overrides);
  const std::vector<PlannedRun> runs = plan_runs(arms, scenario.seeds, o.out);
  std::vector<nlohmann::json> summaries;
  const int worst = run_all(scenario, arms, runs, o, summaries);
  if (scenario.seeds == 1) {
    // The single-seed tables, as they always were.
    if (!scenario.variants.empty()) {
      std::vector<VariantRun> variant_runs;
      for (std::size_t i = 0; i < runs.size(); ++i)
        variant_runs.push_back({arms[i].label, arms[i].overrides, std::move(summaries[i])});
      const nlohmann::json comparison = compare_variants(scenario, variant_runs);
      write_variants(o.out, comparison);
      if (!o.quiet)
        fmt::print("{}  records: {}/{{summary.json, variants.csv}}\n", variants_table(comparison),
                   o.out);
    } else if (scenario.sweep) {
      std::vector<std::pair<std::string, nlohmann::json>> results;
      for (std::size_t i = 0; i < runs.size(); ++i)
        results.emplace_back(arms[i].label, std::move(summaries[i]));
      write_sweep(o.out, *scenario.sweep, results, o.quiet);
    }
    return worst;
  }
  const std::vector<SeededArm> seeded = by_arm(arms, runs, summaries);
  if (!scenario.variants.empty() || scenario.sweep) {
    const std::string kind = scenario.sweep ? "values" : "variants";
    const nlohmann::json comparison = compare_seeded(scenario, kind, seeded);
    if (scenario.sweep) {
      write_seeded_sweep(o.out, *scenario.sweep, comparison);
    } else {
      write_seeded_variants(o.out, comparison);
    }
    if (!o.quiet) {
      fmt::print("{}  records: {}/{{summary.json, {}}}\n", seeded_table(comparison, kind), o.out,
                 scenario.sweep ? "sweep.csv" : "variants.csv");
    }
    return worst;
  }
  const nlohmann::json summary = seeded_summary(scenario, seeded.front());
  write_text(o.out + "/summary.json", summary.dump(2) + "\n");
  if (!o.quiet) {
    const auto& t = summary["figures"]["throughput_samples_per_s"];
    fmt::print(
        "\n{} at {} seeds: {:.1f} samples/s (95% interval {:.1f} .. {:.1f})\n  records: "
        "{}/summary.json\n",
        scenario.name, scenario.seeds, t["mean"].get<double>(), t["ci95_low"].get<double>(),
        t["ci95_high"].get<double>(), o.out);
  }
  return worst;
}

}  // namespace kf
