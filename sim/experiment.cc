#include "sim/experiment.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "sim/compare.h"
#include "sim/report.h"
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
  Simulation sim(scenario);
  ProgressBar bar(!quiet && isatty(STDERR_FILENO));
  sim.run([&bar](const SimulationProgress& p) { bar.update(p); });
  bar.done();
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

// `variants:`: each named arm into OUT/NAME/, then OUT/summary.json and OUT/variants.csv
// comparing them (time to target accuracy, which arm got there first).
int run_variants(const Scenario& scenario, const ExperimentOptions& o) {
  std::vector<VariantRun> runs;
  int worst = 0;
  for (const Arm& arm : expand_arms(scenario, o.file, o.overrides)) {
    if (!o.quiet) {
      std::string set;
      for (const auto& s : arm.overrides)
        set += (set.empty() ? "" : ", ") + s;
      fmt::print("\n== {}{}\n", arm.label, set.empty() ? "" : " (" + set + ")");
    }
    nlohmann::json summary;
    worst = std::max(worst, run_scenario(arm.scenario, o.out + "/" + arm.dir, o.quiet, &summary));
    runs.push_back({arm.label, arm.overrides, std::move(summary)});
  }
  const nlohmann::json comparison = compare_variants(scenario, runs);
  write_variants(o.out, comparison);
  if (!o.quiet)
    fmt::print("{}  records: {}/{{summary.json, variants.csv}}\n", variants_table(comparison),
               o.out);
  return worst;
}

// `sweep:`: one run per value, each in its own directory, and one table for all of them.
int run_sweep(const Scenario& scenario, const ExperimentOptions& o) {
  std::vector<std::pair<std::string, nlohmann::json>> results;
  int worst = 0;
  for (const Arm& arm : expand_arms(scenario, o.file, o.overrides)) {
    if (!o.quiet) fmt::print("\n== {} = {}\n", scenario.sweep->key, arm.label);
    nlohmann::json summary;
    worst = std::max(worst, run_scenario(arm.scenario, o.out + "/" + arm.dir, o.quiet, &summary));
    results.emplace_back(arm.label, std::move(summary));
  }
  write_sweep(o.out, *scenario.sweep, results, o.quiet);
  return worst;
}

}  // namespace

int run_experiment(const Scenario& scenario, const ExperimentOptions& options) {
  if (!options.compare.empty()) return run_compare(scenario, options);
  if (!scenario.variants.empty()) return run_variants(scenario, options);
  if (scenario.sweep) return run_sweep(scenario, options);
  return run_scenario(scenario, options.out, options.quiet);
}

}  // namespace kf
