#include "sim/variants.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace kf {

namespace {

nlohmann::json field(const nlohmann::json& s, const char* key) {
  return s.contains(key) ? s[key] : nlohmann::json(nullptr);
}

// "" for null, else the number with `digits` decimals.
std::string number(const nlohmann::json& v, int digits) {
  if (!v.is_number()) return "";
  return fmt::format("{:.{}f}", v.get<double>(), digits);
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

}  // namespace

nlohmann::json compare_variants(const Scenario& scenario, const std::vector<VariantRun>& runs) {
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& run : runs) {
    const auto& s = run.summary;
    arms.push_back({{"name", run.name},
                    {"overrides", run.overrides},
                    {"workers", field(s, "workers")},
                    {"steps", field(s, "completed_steps")},
                    {"batch_per_worker", field(s, "batch_per_worker")},
                    {"final_batch_per_worker", field(s, "final_batch_per_worker")},
                    {"simulation_end_s", field(s, "simulation_end_s")},
                    {"throughput_samples_per_s", field(s, "throughput_samples_per_s")},
                    {"target_accuracy", field(s, "target_accuracy")},
                    {"time_to_target", field(s, "time_to_target")},
                    {"final_accuracy", field(s, "final_accuracy")},
                    {"best_accuracy", field(s, "best_accuracy")},
                    {"errors", s.contains("errors") ? s["errors"].size() : 0}});
  }
  // Reached first = smallest simulated time; stable, so a tie goes to the arm listed first.
  std::vector<std::size_t> order(arms.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  const auto time_of = [&](std::size_t i) {
    const auto& t = arms[i]["time_to_target"];
    return t.is_object() ? t["time_s"].get<double>() : -1.0;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const double ta = time_of(a), tb = time_of(b);
    if ((ta < 0) != (tb < 0)) return tb < 0;  // reached before not reached
    return ta >= 0 && ta < tb;
  });
  nlohmann::json ranking = nlohmann::json::array();
  for (const std::size_t i : order)
    ranking.push_back(arms[i]["name"]);
  nlohmann::json first = nullptr;
  if (!order.empty() && time_of(order.front()) >= 0) first = arms[order.front()]["name"];
  return {{"scenario", scenario.name},
          {"seed", scenario.seed},
          {"variants", std::move(arms)},
          {"first_to_target", std::move(first)},
          {"ranking", std::move(ranking)}};
}

std::string variants_table(const nlohmann::json& c) {
  std::string out =
      fmt::format("\n{:<16} {:>7} {:>11} {:>9} {:>8} {:>14} {:>9} {:>9}\n", "variant", "steps",
                  "batch/wkr", "sim s", "target", "reached at s", "final", "best");
  for (const auto& v : c["variants"]) {
    const auto& t = v["time_to_target"];
    const std::string batch =
        v["batch_per_worker"].is_number() && v["final_batch_per_worker"].is_number() &&
                v["batch_per_worker"] != v["final_batch_per_worker"]
            ? fmt::format("{}->{}", v["batch_per_worker"].get<int>(),
                          v["final_batch_per_worker"].get<int>())
            : (v["batch_per_worker"].is_number() ? std::to_string(v["batch_per_worker"].get<int>())
                                                 : "-");
    out += fmt::format("{:<16} {:>7} {:>11} {:>9} {:>8} {:>14} {:>9} {:>9}\n",
                       v["name"].get<std::string>(),
                       v["steps"].is_number() ? std::to_string(v["steps"].get<long>()) : "-", batch,
                       number(v["simulation_end_s"], 1), number(v["target_accuracy"], 3),
                       t.is_object() ? number(t["time_s"], 2) : "never",
                       number(v["final_accuracy"], 3), number(v["best_accuracy"], 3));
  }
  const auto& first = c["first_to_target"];
  out += first.is_null() ? "\n  no variant reached its target\n"
                         : fmt::format("\n  first to target: {}\n", first.get<std::string>());
  return out;
}

void write_variants(const std::string& out, const nlohmann::json& c) {
  namespace fs = std::filesystem;
  fs::create_directories(out);
  const auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = out + "/" + name;
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) throw std::runtime_error("cannot write " + path);
    f << text;
    f.close();
    if (!f) throw std::runtime_error("error writing " + path);
  };
  write("summary.json", c.dump(2) + "\n");
  std::string csv =
      "variant,workers,steps,batch_per_worker,final_batch_per_worker,simulation_end_s,"
      "throughput_samples_per_s,target_accuracy,time_to_target_s,time_to_target_step,"
      "final_accuracy,best_accuracy,errors,overrides\n";
  for (const auto& v : c["variants"]) {
    const auto& t = v["time_to_target"];
    std::string overrides;
    for (const auto& o : v["overrides"])
      overrides += (overrides.empty() ? "" : "; ") + o.get<std::string>();
    const auto integer = [](const nlohmann::json& x) {
      return x.is_number() ? std::to_string(x.get<long>()) : std::string();
    };
    csv += fmt::format(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", csv_quoted(v["name"].get<std::string>()),
        integer(v["workers"]), integer(v["steps"]), integer(v["batch_per_worker"]),
        integer(v["final_batch_per_worker"]), number(v["simulation_end_s"], 9),
        number(v["throughput_samples_per_s"], 6), number(v["target_accuracy"], 6),
        t.is_object() ? number(t["time_s"], 9) : "", t.is_object() ? integer(t["step"]) : "",
        number(v["final_accuracy"], 6), number(v["best_accuracy"], 6),
        v["errors"].get<std::size_t>(), csv_quoted(overrides));
  }
  write("variants.csv", csv);
}

}  // namespace kf
