#include "sim/seed_summary.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>

#include "sim/seed_stats.h"

namespace kf {

namespace {

std::optional<double> number_at(const nlohmann::json& j) {
  if (!j.is_number()) return std::nullopt;
  return j.get<double>();
}

// One run's figure, or none (a target not reached, no numeric workload).
std::optional<double> figure(const nlohmann::json& s, const std::string& name) {
  if (name == "efficiency") {
    const auto actual = number_at(s.value("throughput_samples_per_s", nlohmann::json()));
    const auto ideal = number_at(s.value("ideal_samples_per_s", nlohmann::json()));
    if (!actual || !ideal) return std::nullopt;
    return *ideal > 0 ? *actual / *ideal : 0.0;
  }
  if (name == "median_step_s") {
    if (!s.contains("step_time_s")) return std::nullopt;
    return number_at(s["step_time_s"].value("median", nlohmann::json()));
  }
  if (name == "time_to_target_s") {
    const auto t = s.value("time_to_target", nlohmann::json());
    return t.is_object() ? number_at(t.value("time_s", nlohmann::json())) : std::nullopt;
  }
  if (name == "completed_steps" || name == "steps") {
    return number_at(s.value("completed_steps", nlohmann::json()));
  }
  return number_at(s.value(name, nlohmann::json()));
}

// FIGURE: stats over the seeds that have it; null when none has.
nlohmann::json figures_json(const std::vector<nlohmann::json>& summaries) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& name : seed_figures()) {
    std::vector<double> values;
    for (const auto& s : summaries) {
      if (const auto v = figure(s, name)) values.push_back(*v);
    }
    out[name] = values.empty() ? nlohmann::json(nullptr) : to_json(seed_stats(values));
  }
  return out;
}

std::size_t errors_of(const std::vector<nlohmann::json>& summaries) {
  std::size_t n = 0;
  for (const auto& s : summaries)
    n += s.contains("errors") ? s["errors"].size() : 0;
  return n;
}

// Which arm seed k's own runs name for each claim. `first`: smallest time to target (the first
// listed on a tie, none when no arm reached it); `efficient`: largest efficiency.
std::optional<std::string> first_at(const std::vector<SeededArm>& arms, std::size_t k) {
  std::optional<std::string> best;
  double best_time = 0;
  for (const auto& arm : arms) {
    const auto t = figure(arm.summaries[k], "time_to_target_s");
    if (t && (!best || *t < best_time)) {
      best = arm.name;
      best_time = *t;
    }
  }
  return best;
}

std::optional<std::string> most_efficient_at(const std::vector<SeededArm>& arms, std::size_t k) {
  std::optional<std::string> best;
  double best_e = 0;
  for (const auto& arm : arms) {
    const auto e = figure(arm.summaries[k], "efficiency");
    if (e && (!best || *e > best_e)) {
      best = arm.name;
      best_e = *e;
    }
  }
  return best;
}

nlohmann::json name_or_null(const std::optional<std::string>& s) {
  return s ? nlohmann::json(*s) : nlohmann::json(nullptr);
}

std::string csv_quoted(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string fixed(const nlohmann::json& v, int digits) {
  return v.is_number() ? fmt::format("{:.{}f}", v.get<double>(), digits) : std::string();
}

// "F,F_sd,F_ci95_low,F_ci95_high" for the header, or the mean and the rest for a row.
std::string stat_header(const std::string& f) {
  return fmt::format("{0},{0}_sd,{0}_ci95_low,{0}_ci95_high", f);
}
std::string stat_cells(const nlohmann::json& figures, const std::string& f, int digits) {
  const auto& s = figures[f];
  if (!s.is_object()) return ",,,";
  return fmt::format("{},{},{},{}", fixed(s["mean"], digits), fixed(s["sd"], digits),
                     fixed(s["ci95_low"], digits), fixed(s["ci95_high"], digits));
}

}  // namespace

const std::vector<std::string>& seed_figures() {
  static const std::vector<std::string> kFigures{
      "throughput_samples_per_s", "ideal_samples_per_s", "efficiency",     "median_step_s",
      "simulation_end_s",         "time_to_target_s",    "final_accuracy", "best_accuracy"};
  return kFigures;
}

nlohmann::json seeded_summary(const Scenario& scenario, const SeededArm& arm) {
  return {{"scenario", scenario.name},
          {"seeds", arm.seeds},
          {"errors", errors_of(arm.summaries)},
          {"figures", figures_json(arm.summaries)}};
}

nlohmann::json compare_seeded(const Scenario& scenario, const std::string& kind,
                              const std::vector<SeededArm>& arms) {
  nlohmann::json rows = nlohmann::json::array();
  std::optional<std::string> first, efficient;
  double first_time = 0, best_e = 0;
  for (const auto& arm : arms) {
    const auto& s0 = arm.summaries.front();
    nlohmann::json figures = figures_json(arm.summaries);
    std::size_t reached = 0;
    for (const auto& s : arm.summaries)
      reached += figure(s, "time_to_target_s") ? 1 : 0;
    rows.push_back({{"name", arm.name},
                    {"overrides", arm.overrides},
                    {"seeds", arm.seeds},
                    {"workers", s0.value("workers", nlohmann::json())},
                    {"strategy", s0.value("strategy", nlohmann::json())},
                    {"errors", errors_of(arm.summaries)},
                    {"reached_target", reached},
                    {"figures", figures}});
    // Claims from the means; strict comparisons keep the first listed on a tie.
    const auto& t = figures["time_to_target_s"];
    if (reached == arm.summaries.size() && t.is_object()) {
      const double mean = t["mean"].get<double>();
      if (!first || mean < first_time) {
        first = arm.name;
        first_time = mean;
      }
    }
    if (const auto& e = figures["efficiency"]; e.is_object()) {
      const double mean = e["mean"].get<double>();
      if (!efficient || mean > best_e) {
        efficient = arm.name;
        best_e = mean;
      }
    }
  }
  std::vector<std::optional<std::string>> firsts, efficients;
  const std::size_t seeds = arms.empty() ? 0 : arms.front().summaries.size();
  for (std::size_t k = 0; k < seeds; ++k) {
    firsts.push_back(first_at(arms, k));
    efficients.push_back(most_efficient_at(arms, k));
  }
  nlohmann::json by_seed_first = nlohmann::json::array(),
                 by_seed_efficient = nlohmann::json::array();
  for (std::size_t k = 0; k < seeds; ++k) {
    by_seed_first.push_back(name_or_null(firsts[k]));
    by_seed_efficient.push_back(name_or_null(efficients[k]));
  }
  return {{"scenario", scenario.name},
          {"seed", scenario.seed},
          {"seeds", seeds},
          {kind, std::move(rows)},
          {"first_to_target", name_or_null(first)},
          {"first_to_target_seeds_agree", agreeing(firsts, first)},
          {"highest_efficiency", name_or_null(efficient)},
          {"highest_efficiency_seeds_agree", agreeing(efficients, efficient)},
          {"seeds_first_to_target", std::move(by_seed_first)},
          {"seeds_highest_efficiency", std::move(by_seed_efficient)}};
}

void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << text;
  f.close();
  if (!f) throw std::runtime_error("error writing " + path);
}

void write_seeded_variants(const std::string& out, const nlohmann::json& c) {
  write_text(out + "/summary.json", c.dump(2) + "\n");
  std::string csv = "variant,seeds,workers,errors,reached_target,first_to_target_seeds";
  for (const auto& f : seed_figures())
    csv += fmt::format(",{}", stat_header(f));
  csv += ",overrides\n";
  for (const auto& v : c["variants"]) {
    const std::string name = v["name"].get<std::string>();
    std::size_t won = 0;
    for (const auto& w : c["seeds_first_to_target"])
      won += w == name ? 1 : 0;
    std::string overrides;
    for (const auto& o : v["overrides"])
      overrides += (overrides.empty() ? "" : "; ") + o.get<std::string>();
    csv += fmt::format("{},{},{},{},{},{}", csv_quoted(name), v["seeds"].size(),
                       v["workers"].is_number() ? std::to_string(v["workers"].get<long>()) : "",
                       v["errors"].get<std::size_t>(), v["reached_target"].get<std::size_t>(), won);
    for (const auto& f : seed_figures())
      csv += fmt::format(",{}", stat_cells(v["figures"], f, 9));
    csv += fmt::format(",{}\n", csv_quoted(overrides));
  }
  write_text(out + "/variants.csv", csv);
}

void write_seeded_sweep(const std::string& out, const Sweep& sweep, const nlohmann::json& c) {
  write_text(out + "/summary.json", c.dump(2) + "\n");
  // The single-seed sweep.csv's columns, each figure followed by its spread.
  std::string csv =
      fmt::format("key,value,seeds,workers,strategy,{},{},{},{},errors\n",
                  stat_header("throughput_samples_per_s"), stat_header("ideal_samples_per_s"),
                  stat_header("efficiency"), stat_header("median_step_s"));
  for (const auto& v : c["values"]) {
    const auto& f = v["figures"];
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", sweep.key, v["name"].get<std::string>(),
                       v["seeds"].size(),
                       v["workers"].is_number() ? std::to_string(v["workers"].get<long>()) : "",
                       v["strategy"].is_string() ? v["strategy"].get<std::string>() : "",
                       stat_cells(f, "throughput_samples_per_s", 6),
                       stat_cells(f, "ideal_samples_per_s", 6), stat_cells(f, "efficiency", 6),
                       stat_cells(f, "median_step_s", 9), v["errors"].get<std::size_t>());
  }
  write_text(out + "/sweep.csv", csv);
}

std::string seeded_table(const nlohmann::json& c, const std::string& kind) {
  const auto interval = [](const nlohmann::json& s, int digits, double scale) {
    if (!s.is_object()) return std::string("-");
    std::string text = fmt::format("{:.{}f}", scale * s["mean"].get<double>(), digits);
    if (s["ci95_low"].is_number()) {
      text += fmt::format(" [{:.{}f}, {:.{}f}]", scale * s["ci95_low"].get<double>(), digits,
                          scale * s["ci95_high"].get<double>(), digits);
    }
    return text;
  };
  std::string out = fmt::format("\n{:<24} {:>6} {:>34} {:>24} {:>30}\n", kind, "seeds",
                                "samples/s (95% interval)", "efficiency %", "time to target s");
  for (const auto& v : c[kind]) {
    const auto& f = v["figures"];
    out += fmt::format("{:<24} {:>6} {:>34} {:>24} {:>30}\n", v["name"].get<std::string>(),
                       v["seeds"].size(), interval(f["throughput_samples_per_s"], 1, 1),
                       interval(f["efficiency"], 1, 100), interval(f["time_to_target_s"], 2, 1));
  }
  const std::size_t seeds = c["seeds"].get<std::size_t>();
  const auto claim = [&](const char* what, const char* key) {
    const auto& name = c[key];
    return fmt::format("  {}: {} ({} of {} seeds agree)\n", what,
                       name.is_null() ? std::string("none") : name.get<std::string>(),
                       c[fmt::format("{}_seeds_agree", key)].get<std::size_t>(), seeds);
  };
  // First to target only where some arm has a target it reached.
  bool targets = false;
  for (const auto& v : c[kind])
    targets = targets || v["reached_target"].get<std::size_t>() > 0;
  out += fmt::format("\n{}{}", targets ? claim("first to target", "first_to_target") : "",
                     claim("highest efficiency", "highest_efficiency"));
  return out;
}

}  // namespace kf
