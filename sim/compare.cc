#include "sim/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "sim/simulation.h"

namespace kf {

double mean_step_seconds(const WorldRun& run) {
  double sum = 0;
  for (double s : run.step_seconds)
    sum += s;
  return run.step_seconds.empty() ? 0 : sum / static_cast<double>(run.step_seconds.size());
}

Comparison compare_worlds(const Scenario& scenario, const std::vector<WorldKind>& worlds,
                          const std::string& out) {
  if (worlds.size() < 2) throw std::invalid_argument("--compare needs two worlds or more");
  Comparison c;
  for (const WorldKind world : worlds) {
    Scenario variant = scenario;
    variant.world = world;
    Simulation sim(variant);
    sim.run();
    sim.write(out + "/" + option_name(world));
    const nlohmann::json perf = sim.perf();
    WorldRun run{.world = world,
                 .wall_seconds = perf["wall_seconds"].get<double>(),
                 .learning_wall_seconds = perf["learning_wall_seconds"].get<double>(),
                 .summary = sim.summary()};
    for (const auto& s : sim.recorder().cluster_steps())
      run.step_seconds.push_back(to_seconds(s.end - s.begin));
    c.runs.push_back(std::move(run));
  }
  const WorldRun& ref = c.runs.front();
  std::size_t steps = 0;
  for (const auto& r : c.runs)
    steps = std::max(steps, r.step_seconds.size());
  for (std::size_t i = 1; i < c.runs.size(); ++i) {
    const WorldRun& r = c.runs[i];
    const std::size_t both = std::min(ref.step_seconds.size(), r.step_seconds.size());
    double sum = 0, worst = 0, ref_total = 0, total = 0;
    for (std::size_t s = 0; s < both; ++s) {
      const double d = std::abs(r.step_seconds[s] / ref.step_seconds[s] - 1) * 100;
      sum += d;
      worst = std::max(worst, d);
      ref_total += ref.step_seconds[s];
      total += r.step_seconds[s];
    }
    c.mean_abs_pct.push_back(both > 0 ? sum / static_cast<double>(both) : 0.0);
    c.max_abs_pct.push_back(worst);
    c.mean_step_pct.push_back(ref_total > 0 ? (total / ref_total - 1) * 100 : 0.0);
    c.speedup.push_back(r.wall_seconds > 0 ? ref.wall_seconds / r.wall_seconds : 0.0);
    const double own = r.wall_seconds - r.learning_wall_seconds;
    c.world_speedup.push_back(own > 0 ? (ref.wall_seconds - ref.learning_wall_seconds) / own : 0.0);
  }

  std::filesystem::create_directories(out);
  const std::string path = out + "/compare.csv";
  std::ofstream csv(path, std::ios::trunc);
  if (!csv) throw std::runtime_error("cannot write " + path);
  csv << "step";
  for (const auto& r : c.runs)
    csv << "," << option_name(r.world) << "_s";
  for (std::size_t i = 1; i < c.runs.size(); ++i)
    csv << "," << option_name(c.runs[i].world) << "_vs_" << option_name(ref.world) << "_pct";
  csv << "\n";
  for (std::size_t s = 0; s < steps; ++s) {
    csv << s;
    for (const auto& r : c.runs)
      csv << (s < r.step_seconds.size() ? fmt::format(",{:.9f}", r.step_seconds[s]) : ",");
    for (std::size_t i = 1; i < c.runs.size(); ++i) {
      const auto& r = c.runs[i];
      csv << (s < r.step_seconds.size() && s < ref.step_seconds.size()
                  ? fmt::format(",{:.3f}", (r.step_seconds[s] / ref.step_seconds[s] - 1) * 100)
                  : ",");
    }
    csv << "\n";
  }
  csv.close();
  if (!csv) throw std::runtime_error("error writing " + path);
  return c;
}

}  // namespace kf
