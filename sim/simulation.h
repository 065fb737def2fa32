// Simulation: one kfsim run. Builds the world the scenario names (make_world.h) and the workers
// (engine + trainer each, started by the simulated membership service), injects the scenario's
// events when their step or time comes (event_injector.h), runs the world until every worker is
// done, and keeps the records.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"
#include "sim/sim_world.h"
#include "sim/torch/torch_task.h"
#include "workloads/model.h"
#include "workloads/records.h"
#include "workloads/trainer.h"

namespace kf {

// A torch workload's task (workload.torch) at the scenario's seed.
TorchTaskSpec torch_spec(const Scenario& scenario);

struct SimulationProgress {
  std::int64_t steps_done = 0;  // steps every live worker has finished
  std::int64_t steps_total = 0;
  double simulated_seconds = 0;
};

class Simulation {
 public:
  explicit Simulation(Scenario scenario);
  ~Simulation();

  // Runs to completion. `progress` (optional) is called after every cluster step.
  void run(const std::function<void(const SimulationProgress&)>& progress = {});

  const Scenario& scenario() const { return scenario_; }
  const RunRecorder& recorder() const { return recorder_; }
  nlohmann::json summary() const;  // deterministic: the same scenario and seed, the same bytes
  nlohmann::json perf() const;     // wall-clock figures: events/s, simulated s per wall s
  // steps.csv, collectives.csv, events.csv, summary.json, trace.json and perf.json into `dir`;
  // tcp.csv too when the scenario sets tcp_samples and the world is ns-3.
  void write(const std::string& dir) const;

 private:
  class Workers;
  // The trainers' options: the workload's model and compute time, the engine's, the numeric
  // program (whose learning adds its wall time to `learning_seconds`).
  TrainerOptions trainer_options(const ModelProfile& model,
                                 std::shared_ptr<double> learning_seconds);
  // The world's counters and TCP samples, for summary.json and tcp.csv.
  void keep_world_records(const SimWorld& world);
  void use_task_profile();

  Scenario scenario_;
  RunRecorder recorder_;
  std::vector<float> final_parameters_;  // numeric save_parameters: rank 0's at the end
  std::vector<EventWindow> windows_;
  nlohmann::json world_stats_;
  std::string tcp_csv_;  // the ns-3 world's TCP samples, empty if none
  double wall_seconds_ = 0;
  double learning_wall_seconds_ = 0;
  double simulated_seconds_ = 0;
  std::uint64_t simulator_events_ = 0;
  double per_sample_seconds_ = 0;
  int n_workers_ = 0;
};

}  // namespace kf
