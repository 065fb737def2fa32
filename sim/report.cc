#include "sim/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace kf {

ProgressBar::ProgressBar(bool enabled)
    : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

void ProgressBar::update(const SimulationProgress& p) {
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

void ProgressBar::done() {
  if (enabled_) fmt::print(stderr, "\n");
}

namespace {

// A window without steps (an event that lasts to the end has no "after") has no rate.
std::string rate(const nlohmann::json& window) {
  return window.value("steps", 0) > 0 ? fmt::format("{:.1f}", window["samples_per_s"].get<double>())
                                      : std::string("-");
}

void print_events(const nlohmann::json& events) {
  fmt::print("\n  {:<34} {:>10} {:>10} {:>10} {:>8}\n", "event (samples/s)", "before", "during",
             "after", "during/");
  fmt::print("  {:<34} {:>10} {:>10} {:>10} {:>8}\n", "", "", "", "", "before");
  for (const auto& e : events) {
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

}  // namespace

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
  if (!s["events"].empty()) print_events(s["events"]);
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

void write_sweep(const std::string& out, const Sweep& sweep,
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

void print_comparison(const Comparison& c, const Scenario& arm, const std::string& dir,
                      const std::string& where, const std::vector<WorldKind>& worlds) {
  bool lossy = false;  // a packet-level world dropped packets
  fmt::print("\n{}{}\n", arm.name, dir.empty() ? "" : " (" + dir + ")");
  for (std::size_t i = 0; i < c.runs.size(); ++i) {
    const auto& r = c.runs[i];
    fmt::print("  {:<6} steps {:>4}  mean step {:>9.4f} s  wall {:>8.2f} s", option_name(r.world),
               r.step_seconds.size(), mean_step_seconds(r), r.wall_seconds);
    if (i > 0) {
      fmt::print(
          "  per-step |diff| mean {:.2f}% max {:.2f}%  mean step {:+.2f}%  {:.0f}x "
          "faster",
          c.mean_abs_pct[i - 1], c.max_abs_pct[i - 1], c.mean_step_pct[i - 1], c.speedup[i - 1]);
      // A numeric workload's learning costs the same wall time in every world.
      if (r.learning_wall_seconds > 0 || c.runs[0].learning_wall_seconds > 0)
        fmt::print(" ({:.0f}x without the learning)", c.world_speedup[i - 1]);
    }
    // What a fluid world leaves out and the packet world pays for: the usual reason the two
    // disagree.
    const auto stats = r.summary.value("world_stats", nlohmann::json::object());
    const auto drops = stats.value("dropped_packets", std::uint64_t{0});
    const auto timeouts = stats.value("retransmission_timeouts", std::uint64_t{0});
    if (r.world == WorldKind::flow && stats.contains("tcp_losses")) {
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
  if (lossy && arm.flow_tcp == FlowSharing::fair &&
      std::find(worlds.begin(), worlds.end(), WorldKind::flow) != worlds.end()) {
    fmt::print(
        "  note: flow_tcp: fair has no windows and no losses: where TCP drops, its windows "
        "split a port unevenly and the fair flow world is optimistic (docs/worlds.md)\n");
  }
  fmt::print("  per-step times: {}/compare.csv\n", where);
}

}  // namespace kf
