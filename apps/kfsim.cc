// kfsim: run a scenario file in the simulated world and write its records.
//
//   kfsim FILE [--out DIR] [--seed N] [--set key.path=value ...] [--quiet] [--plot]
//   kfsim FILE --world flow          the flow-level world instead of the file's `world:`
//   kfsim FILE --compare ns3,flow    run both, report per-step time differences (OUT/compare.csv)
//
// A file with `sweep:` runs once per value (OUT/KEY=VALUE/, OUT/sweep.csv); one with `variants:`
// runs each named arm (OUT/NAME/) and compares them (OUT/summary.json, OUT/variants.csv).
// Exit codes: 0 done, 1 the run failed, 2 a bad scenario file or flag.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "sim/compare.h"
#include "sim/scenario/scenario.h"
#include "sim/simulation.h"
#include "sim/variants.h"

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
    // A window without steps (an event that lasts to the end has no "after") has no rate.
    const auto rate = [](const nlohmann::json& window) {
      return window.value("steps", 0) > 0
                 ? fmt::format("{:.1f}", window["samples_per_s"].get<double>())
                 : std::string("-");
    };
    for (const auto& e : s["events"]) {
      const auto ratio = e["during_over_before"];
      fmt::print("  {:<34} {:>10} {:>10} {:>10} {:>8}\n", e["label"].get<std::string>(),
                 rate(e["before"]), rate(e["during"]), rate(e["after"]),
                 ratio.is_null() ? std::string("-") : fmt::format("{:.2f}", ratio.get<double>()));
      // What a policy did about it: the point of an adaptive run.
      if (const auto a = e.find("adaptation"); a != e.end() && a->is_object()) {
        std::string line =
            fmt::format("    adapted at step {} ({} steps in): {} {}", a->value("step", -1),
                        a->value("steps_from_start", -1), a->value("kind", std::string("?")),
                        a->value("detail", std::string()));
        if (const auto r = a->find("recovered"); r != a->end() && r->value("steps", 0) > 0) {
          line += fmt::format(", then {:.1f} samples/s", (*r)["samples_per_s"].get<double>());
          if (const auto over = a->find("recovered_over_before");
              over != a->end() && over->is_number())
            line += fmt::format(" ({:.2f} of before)", over->get<double>());
        }
        fmt::print("{}\n", line);
      }
    }
  }
  // Every policy action of the run, the first few of them (a resize is otherwise invisible here).
  if (const auto& all = s["adaptations"]; !all.empty()) {
    constexpr std::size_t kShown = 8;
    fmt::print("\n  adaptations ({})\n", all.size());
    for (std::size_t i = 0; i < all.size() && i < kShown; ++i) {
      fmt::print("    step {:>5}  {:<8} {}\n", all[i].value("step", std::int64_t{-1}),
                 all[i].value("kind", std::string("?")), all[i].value("detail", std::string()));
    }
    if (all.size() > kShown) fmt::print("    ... {} more in summary.json\n", all.size() - kShown);
  }
  for (const auto& err : s["errors"])
    fmt::print("  error: {}\n", err.get<std::string>());
  fmt::print("\n  wall {:.1f} s   {:.0f} simulator events/s   {:.3f} simulated s per wall s\n",
             perf["wall_seconds"].get<double>(), perf["events_per_wall_second"].get<double>(),
             perf["simulated_seconds_per_wall_second"].get<double>());
  fmt::print(
      "  records: {}/{{steps.csv, peers.csv, collectives.csv, events.csv, summary.json, "
      "trace.json, perf.json{}}}\n",
      out, std::filesystem::exists(std::filesystem::path(out) / "tcp.csv") ? ", tcp.csv" : "");
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

// --compare: the scenario (each value of a sweep, each arm of `variants:`) in every world,
// per-step times side by side.
int run_compare(const std::string& file, const std::vector<std::string>& overrides,
                const kf::Scenario& scenario, const std::vector<std::string>& worlds,
                const std::string& out, bool quiet) {
  std::vector<std::pair<std::string, kf::Scenario>> variants;
  if (!scenario.variants.empty()) {
    for (const auto& arm : scenario.variants)
      variants.emplace_back(arm.name, *arm.scenario);
  } else if (!scenario.sweep) {
    variants.emplace_back("", scenario);
  } else {
    for (const auto& value : scenario.sweep->values) {
      auto o = overrides;
      o.push_back(scenario.sweep->key + "=" + value);
      kf::Scenario v = kf::load_scenario(file, o);
      v.sweep.reset();
      std::string dir = scenario.sweep->key + "=" + value;
      std::replace(dir.begin(), dir.end(), '/', '_');
      variants.emplace_back(dir, std::move(v));
    }
  }
  std::ofstream table;
  if (scenario.sweep || !scenario.variants.empty()) {
    std::filesystem::create_directories(out);
    table.open(out + "/compare.csv", std::ios::trunc);
    if (!table) throw std::runtime_error("cannot write " + out + "/compare.csv");
    table << "variant,world,mean_step_s,mean_abs_pct,max_abs_pct,mean_step_pct\n";
  }
  int worst = 0;
  for (const auto& [dir, variant] : variants) {
    const std::string where = dir.empty() ? out : out + "/" + dir;
    const kf::Comparison c = kf::compare_worlds(variant, worlds, where);
    bool lossy = false;  // a packet-level world dropped packets
    if (!quiet) fmt::print("\n{}{}\n", variant.name, dir.empty() ? "" : " (" + dir + ")");
    for (std::size_t i = 0; i < c.runs.size(); ++i) {
      const auto& r = c.runs[i];
      double mean = 0;
      for (double s : r.step_seconds)
        mean += s;
      mean = r.step_seconds.empty() ? 0 : mean / static_cast<double>(r.step_seconds.size());
      if (!r.summary["errors"].empty()) worst = 1;
      if (!quiet) {
        fmt::print("  {:<6} steps {:>4}  mean step {:>9.4f} s  wall {:>8.2f} s", r.world,
                   r.step_seconds.size(), mean, r.wall_seconds);
        if (i > 0) {
          fmt::print(
              "  per-step |diff| mean {:.2f}% max {:.2f}%  mean step {:+.2f}%  {:.0f}x "
              "faster",
              c.mean_abs_pct[i - 1], c.max_abs_pct[i - 1], c.mean_step_pct[i - 1],
              c.speedup[i - 1]);
          // A numeric workload's learning costs the same wall time in every world.
          if (r.learning_wall_seconds > 0 || c.runs[0].learning_wall_seconds > 0)
            fmt::print(" ({:.0f}x without the learning)", c.world_speedup[i - 1]);
        }
        // What a fluid world leaves out and the packet world pays for: the usual reason the
        // two disagree.
        const auto stats = r.summary.value("world_stats", nlohmann::json::object());
        const auto drops = stats.value("dropped_packets", std::uint64_t{0});
        const auto timeouts = stats.value("retransmission_timeouts", std::uint64_t{0});
        if (r.world == "flow" && stats.contains("tcp_losses")) {
          fmt::print("  {} window backoffs, {} retransmission timeouts",
                     stats.value("tcp_losses", std::uint64_t{0}),
                     stats.value("tcp_timeouts", std::uint64_t{0}));
        } else if (drops + timeouts > 0) {
          fmt::print(
              "  {} packets dropped, {} lost retransmissions resent, {} retransmission "
              "timeouts",
              drops, stats.value("lost_retransmissions", std::uint64_t{0}), timeouts);
          lossy = lossy || drops > 0;
        }
        fmt::print("\n");
      }
      if (table.is_open()) {
        table << fmt::format("{},{},{:.9f},{},{},{}\n", dir, r.world, mean,
                             i > 0 ? fmt::format("{:.3f}", c.mean_abs_pct[i - 1]) : "",
                             i > 0 ? fmt::format("{:.3f}", c.max_abs_pct[i - 1]) : "",
                             i > 0 ? fmt::format("{:.3f}", c.mean_step_pct[i - 1]) : "");
      }
    }
    if (!quiet && lossy && variant.flow_tcp == "fair" &&
        std::find(worlds.begin(), worlds.end(), "flow") != worlds.end()) {
      fmt::print(
          "  note: flow_tcp: fair has no windows and no losses: where TCP drops, its windows "
          "split a port unevenly and the fair flow world is optimistic (scenarios/README.md, "
          "Worlds)\n");
    }
    if (!quiet) fmt::print("  per-step times: {}/compare.csv\n", where);
  }
  return worst;
}

// `variants:`: each named arm into OUT/NAME/, then OUT/summary.json and OUT/variants.csv
// comparing them (time to target accuracy, which arm got there first).
int run_variants(const kf::Scenario& scenario, const std::string& out, bool quiet) {
  std::vector<kf::VariantRun> runs;
  int worst = 0;
  for (const auto& v : scenario.variants) {
    if (!quiet) {
      std::string set;
      for (const auto& o : v.overrides)
        set += (set.empty() ? "" : ", ") + o;
      fmt::print("\n== {}{}\n", v.name, set.empty() ? "" : " (" + set + ")");
    }
    nlohmann::json summary;
    worst = std::max(worst, run_one(*v.scenario, out + "/" + v.name, quiet, &summary));
    runs.push_back({v.name, v.overrides, std::move(summary)});
  }
  const nlohmann::json comparison = kf::compare_variants(scenario, runs);
  kf::write_variants(out, comparison);
  if (!quiet)
    fmt::print("{}  records: {}/{{summary.json, variants.csv}}\n", kf::variants_table(comparison),
               out);
  return worst;
}

// --plot: analysis/plot.py over the records just written (PNG + PDF beside them). The script is
// found above the executable (build/<dir>/apps/kfsim -> analysis/plot.py) or in $KF_ANALYSIS_DIR.
int plot_records(const std::string& out, int code, bool quiet) {
  namespace fs = std::filesystem;
  fs::path script;
  if (const char* dir = std::getenv("KF_ANALYSIS_DIR")) script = fs::path(dir) / "plot.py";
  std::error_code ec;
  for (fs::path p = fs::read_symlink("/proc/self/exe", ec).parent_path();
       script.empty() && !ec && p.has_relative_path(); p = p.parent_path()) {
    if (fs::exists(p / "analysis" / "plot.py")) script = p / "analysis" / "plot.py";
  }
  if (script.empty() || !fs::exists(script)) {
    fmt::print(stderr, "kfsim --plot: cannot find analysis/plot.py (set KF_ANALYSIS_DIR)\n");
    return std::max(code, 1);
  }
  const std::string python = "/usr/bin/python3", path = script.string();
  std::vector<char*> argv{const_cast<char*>(python.c_str()), const_cast<char*>(path.c_str()),
                          const_cast<char*>("-q"), const_cast<char*>(out.c_str()), nullptr};
  pid_t pid = 0;
  int status = 0;
  if (posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0 ||
      waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print(stderr,
               "kfsim --plot: {} {} {} failed; it needs {} with python3-matplotlib and "
               "python3-numpy (./kf setup installs them)\n",
               python, path, out, python);
    return std::max(code, 1);
  }
  if (!quiet) fmt::print("  plots: {}/*.png, *.pdf\n", out);
  return code;
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
    if (seed) overrides.push_back(fmt::format("seed={}", *seed));
    if (!world.empty()) overrides.push_back("world=" + world);
    // Every world named must be one the scenario may name.
    for (const auto& w : compare) {
      auto o = overrides;
      o.push_back("world=" + w);
      kf::load_scenario(file, o);
    }
    scenario = kf::load_scenario(file, overrides);
  } catch (const kf::ScenarioError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  if (out.empty()) out = "out/" + scenario.name;
  try {
    const auto done = [&](int code) { return plot ? plot_records(out, code, quiet) : code; };
    if (!compare.empty()) return done(run_compare(file, overrides, scenario, compare, out, quiet));
    if (!scenario.variants.empty()) return done(run_variants(scenario, out, quiet));
    if (!scenario.sweep) return done(run_one(scenario, out, quiet));
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
    return done(worst);
  } catch (const kf::ScenarioError& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "kfsim: {}\n", e.what());
    return 1;
  }
  return 0;
}
