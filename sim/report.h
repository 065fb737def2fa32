// What kfsim shows on the terminal: a progress bar while a run goes, then its summary, and the
// tables of a sweep or a comparison between worlds. Files these write (sweep.csv) are records;
// everything else is for the person watching.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/compare.h"
#include "sim/scenario/scenario.h"
#include "sim/simulation.h"

namespace kf {

// One line on a terminal, redrawn: step, simulated time, wall time, ETA. Draws nothing when
// disabled (quiet, or stderr is not a terminal).
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled);
  void update(const SimulationProgress& p);
  void done();

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
};

// A run's summary.json (and perf.json's wall-clock figures) as a few lines: throughput, each
// event's before / during / after, what a policy did about it, every adaptation.
void print_summary(const nlohmann::json& summary, const nlohmann::json& perf,
                   const std::string& out);

// OUT/sweep.csv: one row per swept value, actual against ideal throughput; and the same as a
// table unless quiet. Throws std::runtime_error when the file cannot be written.
void write_sweep(const std::string& out, const Sweep& sweep,
                 const std::vector<std::pair<std::string, nlohmann::json>>& results, bool quiet);

// One world comparison (one arm) as lines: each world's mean step and wall time, the others'
// per-step differences from the first, and what a packet world lost.
void print_comparison(const Comparison& c, const Scenario& arm, const std::string& dir,
                      const std::string& where, const std::vector<WorldKind>& worlds);

}  // namespace kf
