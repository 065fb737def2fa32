// kfsim: run a scenario file in the simulated world and write its records.
//
//   kfsim FILE [--out DIR] [--seed N] [--set key.path=value ...] [--quiet]
//
// Exit codes: 0 done, 1 the run failed, 2 a bad scenario file or flag.
#include <fmt/format.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "transport/sim/scenario.h"
#include "transport/sim/simulation.h"

namespace {

// One line on a terminal, redrawn: step, simulated time, wall time, ETA.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled)
      : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}
  void update(const kf::SimulationProgress& p) {
    if (!enabled_ || p.steps_total <= 0) return;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double fraction = static_cast<double>(p.steps_done) / static_cast<double>(p.steps_total);
    const double eta = fraction > 0 ? wall / fraction - wall : 0;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(fraction * kWidth);
    fmt::print(stderr, "\r[{}{}] step {}/{}  sim {:.1f}s  wall {:.1f}s  eta {:.0f}s   ",
               std::string(static_cast<std::size_t>(filled), '#'),
               std::string(static_cast<std::size_t>(kWidth - filled), '.'), p.steps_done,
               p.steps_total, p.simulated_seconds, wall, eta);
    std::fflush(stderr);
  }
  void done() {
    if (enabled_) fmt::print(stderr, "\n");
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

void print_summary(const nlohmann::json& s, const nlohmann::json& perf, const std::string& out) {
  fmt::print("\n{} ({} workers, {}, {} on {}, batch {}/worker)\n", s["scenario"].get<std::string>(),
             s["workers"].get<int>(), s["strategy"].get<std::string>(),
             s["model"].get<std::string>(), s["device"].get<std::string>(),
             s["batch_per_worker"].get<int>());
  fmt::print(
      "  steps {:>5}   simulated {:>9.3f} s   throughput {:>9.1f} samples/s   "
      "median step {:.3f} s\n",
      s["completed_steps"].get<int>(), s["simulation_end_s"].get<double>(),
      s["throughput_samples_per_s"].get<double>(), s["step_time_s"]["median"].get<double>());
  if (!s["events"].empty()) {
    fmt::print("\n  {:<34} {:>10} {:>10} {:>10} {:>8}\n", "event (samples/s)", "before", "during",
               "after", "during/");
    fmt::print("  {:<34} {:>10} {:>10} {:>10} {:>8}\n", "", "", "", "", "before");
    for (const auto& e : s["events"]) {
      const auto ratio = e["during_over_before"];
      fmt::print("  {:<34} {:>10.1f} {:>10.1f} {:>10.1f} {:>8}\n", e["label"].get<std::string>(),
                 e["before"]["samples_per_s"].get<double>(),
                 e["during"]["samples_per_s"].get<double>(),
                 e["after"]["samples_per_s"].get<double>(),
                 ratio.is_null() ? std::string("-") : fmt::format("{:.2f}", ratio.get<double>()));
    }
  }
  for (const auto& err : s["errors"])
    fmt::print("  error: {}\n", err.get<std::string>());
  fmt::print("\n  wall {:.1f} s   {:.0f} simulator events/s   {:.3f} simulated s per wall s\n",
             perf["wall_seconds"].get<double>(), perf["events_per_wall_second"].get<double>(),
             perf["simulated_seconds_per_wall_second"].get<double>());
  fmt::print(
      "  records: {}/{{steps.csv, peers.csv, collectives.csv, events.csv, summary.json, trace.json, "
      "perf.json}}\n",
      out);
}

// Runs one scenario into `out`; 0 when it ran as planned, 1 when it ended with errors that no
// injected failure explains.
int run_one(const kf::Scenario& scenario, const std::string& out, bool quiet,
            nlohmann::json* summary_out = nullptr) {
  kf::Simulation sim(scenario);
  ProgressBar bar(!quiet && isatty(STDERR_FILENO));
  sim.run([&bar](const kf::SimulationProgress& p) { bar.update(p); });
  bar.done();
  sim.write(out);
  const auto summary = sim.summary();
  if (summary_out != nullptr) *summary_out = summary;
  if (!quiet) print_summary(summary, sim.perf(), out);
  // Errors are the expected outcome of an injected failure; otherwise the run failed.
  const bool failure_injected = std::any_of(
      scenario.events.begin(), scenario.events.end(),
      [](const kf::ScenarioEvent& e) { return std::holds_alternative<kf::FailEvent>(e.what); });
  if (!summary["errors"].empty() && !failure_injected) {
    fmt::print(stderr, "kfsim: the run ended with errors (see {}/summary.json)\n", out);
    return 1;
  }
  return 0;
}

// sweep.csv beside the runs: one row per value, actual against ideal throughput.
void write_sweep(const std::string& out, const kf::Sweep& sweep,
                 const std::vector<std::pair<std::string, nlohmann::json>>& results, bool quiet) {
  const std::string path = out + "/sweep.csv";
  std::ofstream csv(path, std::ios::trunc);
  if (!csv) throw std::runtime_error("cannot write " + path);
  csv << "key,value,workers,strategy,throughput_samples_per_s,ideal_samples_per_s,efficiency,"
         "median_step_s,errors\n";
  if (!quiet) {
    fmt::print("\n{:<24} {:>8} {:>22} {:>12} {:>12} {:>10}\n", sweep.key, "workers", "strategy",
               "samples/s", "ideal", "efficiency");
  }
  for (const auto& [value, s] : results) {
    const double actual = s["throughput_samples_per_s"].get<double>();
    const double ideal = s["ideal_samples_per_s"].get<double>();
    const double efficiency = ideal > 0 ? actual / ideal : 0.0;
    csv << fmt::format("{},{},{},{},{:.6f},{:.6f},{:.6f},{:.9f},{}\n", sweep.key, value,
                       s["workers"].get<int>(), s["strategy"].get<std::string>(), actual, ideal,
                       efficiency, s["step_time_s"]["median"].get<double>(), s["errors"].size());
    if (!quiet) {
      fmt::print("{:<24} {:>8} {:>22} {:>12.1f} {:>12.1f} {:>9.0f}%\n", value,
                 s["workers"].get<int>(), s["strategy"].get<std::string>(), actual, ideal,
                 100 * efficiency);
    }
  }
  csv.close();
  if (!csv) throw std::runtime_error("error writing " + path);
  if (!quiet) fmt::print("\n  sweep: {}\n", path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kfsim: run a KungFu testbed scenario in the simulated world"};
  std::string file;
  std::string out;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> overrides;
  bool quiet = false;
  app.add_option("file", file, "scenario YAML file")->required();
  app.add_option("--out", out, "directory for the records (default: out/<scenario name>)");
  app.add_option("--seed", seed, "override the scenario's seed");
  app.add_option("--set", overrides, "override a key, e.g. --set steps=20 (repeatable)");
  app.add_flag("-q,--quiet", quiet, "no progress bar and no summary table");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  kf::Scenario scenario;
  try {
    if (seed) overrides.push_back(fmt::format("seed={}", *seed));
    scenario = kf::load_scenario(file, overrides);
  } catch (const kf::ScenarioError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  if (out.empty()) out = "out/" + scenario.name;

  try {
    if (!scenario.sweep) return run_one(scenario, out, quiet);
    // One run per swept value, each in its own directory, and one table for all of them.
    const kf::Sweep& sweep = *scenario.sweep;
    std::vector<std::pair<std::string, nlohmann::json>> results;
    int worst = 0;
    for (const auto& value : sweep.values) {
      auto variant_overrides = overrides;
      variant_overrides.push_back(sweep.key + "=" + value);
      kf::Scenario variant = kf::load_scenario(file, variant_overrides);
      variant.sweep.reset();
      std::string dir_name = sweep.key + "=" + value;
      std::replace(dir_name.begin(), dir_name.end(), '/', '_');
      if (!quiet) fmt::print("\n== {} = {}\n", sweep.key, value);
      nlohmann::json summary;
      worst = std::max(worst, run_one(variant, out + "/" + dir_name, quiet, &summary));
      results.emplace_back(value, std::move(summary));
    }
    write_sweep(out, sweep, results, quiet);
    return worst;
  } catch (const kf::ScenarioError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kfsim: {}\n", e.what());
    return 1;
  }
  return 0;
}
