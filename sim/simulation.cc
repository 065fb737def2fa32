#include "sim/simulation.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "runtime/engine.h"
#include "sim/event_injector.h"
#include "sim/make_world.h"
#include "sim/scenario/profile_file.h"
#include "sim/sim_membership.h"
#include "sim/timed_numeric_model.h"
#include "sim/torch/torch_task.h"
#include "workloads/model.h"
#include "workloads/numeric_program.h"
#include "workloads/trainer.h"

namespace kf {

namespace {

// Every worker slot of the topology as a PeerID (host name, port), and the runners: one per host.
std::pair<std::vector<PeerID>, std::vector<PeerID>> slots_of(const PhysicalTopology& topo) {
  std::vector<PeerID> workers, runners;
  std::map<int, int> next_port;
  for (std::size_t r = 0; r < topo.worker_host.size(); ++r) {
    const int host = topo.worker_host[r];
    const std::string name = fmt::format("host{}", host);
    auto [it, fresh] = next_port.try_emplace(host, 10000);
    if (fresh) runners.push_back({name, 9999});
    workers.push_back({name, static_cast<std::uint16_t>(it->second++)});
  }
  return {workers, runners};
}

// The first `n` workers, spread over hosts as the resize rule would place them (one per host
// before a second on any), so growing later keeps ranks stable.
ClusterSpec initial_cluster(const std::vector<PeerID>& slots, const std::vector<PeerID>& runners,
                            int n) {
  const ClusterSpec one(1, runners, {slots.front()});
  if (n == static_cast<int>(slots.size())) return ClusterSpec(1, runners, slots);
  std::map<std::string, int> per_host;
  for (const auto& s : slots)
    ++per_host[s.host];
  return one.resized(n, 10000, per_host.begin()->second);
}

}  // namespace

TorchTaskSpec torch_spec(const Scenario& scenario) {
  const NumericConfig& c = *scenario.workload.numeric;
  return {.module = c.module, .train = c.train, .test = c.test, .seed = scenario.seed};
}

namespace {

// The scenario's numeric task: its model and data, made once and shared by every worker. Making
// the data and the model's passes add their wall time to `learning_seconds`.
NumericOptions numeric_options(const Scenario& sc, std::shared_ptr<double> learning_seconds) {
  const NumericConfig& c = *sc.workload.numeric;
  std::shared_ptr<const NumericModel> model;
  std::shared_ptr<const Dataset> train, test;
  if (c.model == "torch") {
    // The user's model and data, through the embedded interpreter (sim/torch/).
    const LearningClock clock(*learning_seconds);
    TorchWorkload t = load_torch_workload(torch_spec(sc));
    model = std::move(t.model);
    train = std::move(t.train);
    test = std::move(t.test);
  } else {
    auto [tr, te] = [&] {
      const LearningClock clock(*learning_seconds);
      return load_dataset(c.dataset, c.path,
                          {.features = c.features,
                           .classes = c.classes,
                           .train = c.train,
                           .test = c.test,
                           .separation = c.separation,
                           .noise = c.noise,
                           .seed = sc.seed});
    }();
    train = std::make_shared<Dataset>(std::move(tr));
    test = std::make_shared<Dataset>(std::move(te));
    model = make_numeric_model(c.model, train->features, train->classes, c.hidden);
  }
  return {
      .model = std::make_shared<TimedNumericModel>(std::move(model), std::move(learning_seconds)),
      .train = train,
      .test = test,
      .sync = sc.optimizer,
      .sma_alpha = c.sma_alpha,
      .ada_switch_step = c.ada_switch_step,
      .optimizer = {.name = c.local_optimizer, .momentum = c.momentum},
      .seed = sc.seed,
      .eval_every = c.eval_every,
      .gns_every = c.gns_every,
      .variance_every = c.variance_every,
      .cost_bytes = c.cost != StepCost::profile ? 0
                    : !sc.workload.tensor_bytes.empty()
                        ? std::accumulate(sc.workload.tensor_bytes.begin(),
                                          sc.workload.tensor_bytes.end(), std::size_t{0})
                        : workload_model(sc.workload).parameter_count() * sizeof(float)};
}

PolicyRunner make_policies(const std::vector<PolicySpec>& specs) {
  std::vector<std::unique_ptr<Policy>> out;
  for (const auto& spec : specs)
    out.push_back(make_policy(spec));
  return PolicyRunner(std::move(out));
}

}  // namespace

Simulation::Simulation(Scenario scenario) : scenario_(std::move(scenario)) {}
Simulation::~Simulation() = default;

// The run's workers, by topology slot: a trainer per slot that runs one, replaced when a worker
// starts there again (an elastic resize), and the simulated membership service that starts them.
class Simulation::Workers {
 public:
  Workers(const Scenario& scenario, SimWorld& world, RunRecorder& recorder,
          TrainerOptions trainer_options)
      : scenario_(scenario),
        world_(world),
        recorder_(recorder),
        trainer_options_(std::move(trainer_options)),
        trainers_(static_cast<std::size_t>(world.workers())) {}
  ~Workers() { close(); }
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  // The membership service, over every slot of the topology (`slots`), with `cluster` running.
  void open_membership(const std::vector<PeerID>& slots, const ClusterSpec& cluster) {
    std::map<std::string, int> per_host;
    for (const auto& s : slots)
      ++per_host[s.host];
    membership_ = std::make_unique<SimMembership>(
        world_, slots, cluster,
        SimMembershipOptions{.config_latency = scenario_.elastic.config_latency,
                             .spawn_delay = scenario_.elastic.spawn_delay,
                             .slots_per_host = per_host.begin()->second},
        [this](const ClusterSpec& c, int rank, int slot) { start(c, rank, slot, true); });
  }

  void start_all(const ClusterSpec& cluster) {
    for (int r = 0; r < cluster.size(); ++r)
      start(cluster, r, membership_->slot_of(cluster.worker(r)), false);
  }

  // Worker `slot` dies: false when none runs there.
  bool abandon(int slot) {
    auto& t = trainers_[static_cast<std::size_t>(slot)];
    if (!t || t->finished()) return false;
    t->abandon();
    return true;
  }

  bool all_finished() const {
    for (const auto& t : trainers_)
      if (t && !t->finished() && t->engine() != nullptr) return false;
    return true;
  }

  // Rank 0's parameters, when a numeric program trains (empty otherwise): rank 0 of the cluster
  // the run ended with, among the workers that finished it.
  std::vector<float> final_parameters() const {
    for (const auto& t : trainers_) {
      if (!t || !t->finished() || t->detached()) continue;
      const auto* p = dynamic_cast<const NumericProgram*>(t->program());
      if (p != nullptr && p->rank() == 0) return {p->parameters().begin(), p->parameters().end()};
    }
    return {};
  }

  // Trainers (and their engines) go before the world: engine destructors complete what is
  // pending.
  void close() {
    trainers_.clear();
    membership_.reset();
  }

 private:
  void start(const ClusterSpec& c, int rank, int slot, bool joining) {
    auto& t = trainers_[static_cast<std::size_t>(slot)];
    if (t && !t->finished()) return;  // running: a survivor
    TrainerOptions o = trainer_options_;
    o.joining = joining;
    t = std::make_unique<Trainer>(c, rank,
                                  TrainerWorld{.executor = world_.executor(),
                                               .compute = world_.compute(slot),
                                               .membership = membership_.get()},
                                  o, make_policies(scenario_.policies), recorder_);
    Trainer* trainer = t.get();
    world_.executor().post([trainer] { trainer->start(); });
  }

  const Scenario& scenario_;
  SimWorld& world_;
  RunRecorder& recorder_;
  TrainerOptions trainer_options_;
  std::vector<std::unique_ptr<Trainer>> trainers_;
  std::unique_ptr<SimMembership> membership_;
};

namespace {

// workload.tensors: a synthetic model whose gradients are exactly those tensors (f32).
ModelProfile synthetic_model(const WorkloadConfig& w) {
  ModelProfile synthetic{.name = "tensors", .tensors = {}, .forward_gflops = 0};
  for (std::size_t i = 0; i < w.tensor_bytes.size(); ++i) {
    synthetic.tensors.push_back(
        GradientTensor{.name = "tensor" + std::to_string(i), .count = w.tensor_bytes[i] / 4});
  }
  return synthetic;
}

}  // namespace

TrainerOptions Simulation::trainer_options(const ModelProfile& model,
                                           std::shared_ptr<double> learning_seconds) {
  const WorkloadConfig& w = scenario_.workload;
  // workload.compute: the step's time, spread over the batch (a whole step of it per step).
  const auto per_sample = w.compute ? *w.compute / w.batch_per_worker
                                    : compute_time_per_sample(workload_model(w), w.device);
  per_sample_seconds_ = to_seconds(per_sample);
  TrainerOptions o{.model = &model,
                   .batch_per_worker = w.batch_per_worker,
                   .fusion_bytes = w.fusion_bytes,
                   .bucketing = w.bucketing,
                   .device = w.device,
                   .phantom = w.phantom,
                   .steps = scenario_.steps,
                   .compute_per_sample = per_sample,
                   .engine = {.chunk_bytes = scenario_.chunk_bytes,
                              .timeout = scenario_.timeout,
                              .strategy = scenario_.strategy,
                              .auto_ring_part_bytes = scenario_.auto_ring_part_bytes,
                              .auto_local_ring_part_bytes = scenario_.auto_local_ring_part_bytes,
                              .auto_doubling_bytes = scenario_.auto_doubling_bytes,
                              .auto_pair_doubling_bytes = scenario_.auto_pair_doubling_bytes,
                              .auto_halving_doubling_bytes = scenario_.auto_halving_doubling_bytes},
                   .ping_every = scenario_.ping_every};
  if (w.numeric) {
    o.learning_rate = w.numeric->learning_rate;
    o.program = [numeric = numeric_options(scenario_, std::move(learning_seconds))](int rank,
                                                                                    int size) {
      return std::make_unique<NumericProgram>(numeric, rank, size);
    };
  }
  return o;
}

void Simulation::run(const std::function<void(const SimulationProgress&)>& progress) {
  const auto wall_start = std::chrono::steady_clock::now();
  const auto learning_seconds = std::make_shared<double>(0.0);
  use_task_profile();

  // ---- the world and its workers ----
  const PhysicalTopology topo = build_topology(scenario_.topology);
  const std::unique_ptr<SimWorld> world_owner = make_world(scenario_, topo);
  SimWorld& world = *world_owner;
  const auto [slot_ids, runners] = slots_of(topo);
  const int initial =
      scenario_.elastic.initial_workers > 0 ? scenario_.elastic.initial_workers : world.workers();
  const ClusterSpec cluster = initial_cluster(slot_ids, runners, initial);
  n_workers_ = initial;
  const ModelProfile synthetic = synthetic_model(scenario_.workload);
  const ModelProfile& model =
      synthetic.tensors.empty() ? workload_model(scenario_.workload) : synthetic;
  Workers workers(scenario_, world, recorder_, trainer_options(model, learning_seconds));
  workers.open_membership(slot_ids, cluster);
  // The run ends when no trainer is left running (background traffic would go on forever).
  const auto check_done = [&] {
    if (workers.all_finished()) world.stop();
  };

  // ---- the scenario's events ----
  EventInjector injector(world, recorder_, windows_,
                         {.abandon_worker = [&](int slot) { return workers.abandon(slot); },
                          .worker_died = check_done});
  injector.schedule(scenario_.events);
  recorder_.on_step_started = [&](int, std::int64_t step, TimePoint) {
    injector.step_started(step);
  };
  std::map<std::int64_t, int> finished_per_step;
  recorder_.on_step_finished = [&](const StepRecord& s) {
    if (++finished_per_step[s.step] < s.cluster_size) return;
    if (progress) {
      progress({.steps_done = s.step + 1,
                .steps_total = scenario_.steps,
                .simulated_seconds = to_seconds(world.now().time_since_epoch())});
    }
  };
  recorder_.on_worker_finished = [&](int, const Status&, TimePoint) { check_done(); };

  workers.start_all(cluster);
  try {
    world.run();
  } catch (...) {
    // An error that escapes a step (a torch task's, sim/torch/): the workers are closed while
    // the world, the membership service and the hooks' targets are still alive, with the hooks
    // unset so that nothing the closing completes reaches the injector; then it is reported.
    recorder_.on_step_started = nullptr;
    recorder_.on_step_finished = nullptr;
    recorder_.on_worker_finished = nullptr;
    workers.close();
    throw;
  }

  // ---- what the world saw ----
  keep_world_records(world);
  if (scenario_.workload.numeric && scenario_.workload.numeric->save_parameters)
    final_parameters_ = workers.final_parameters();
  workers.close();
  wall_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  learning_wall_seconds_ = *learning_seconds;
}

// A torch workload whose scenario names no model nor profile takes its compute time from the
// task's profile() file, when it names one (else the default model's, as any workload).
void Simulation::use_task_profile() {
  WorkloadConfig& w = scenario_.workload;
  if (!w.numeric || w.numeric->model != "torch" || w.model_named) return;
  const std::string file = torch_task_profile(torch_spec(scenario_));
  if (file.empty()) return;
  w.profile = std::make_shared<const ModelProfile>(load_profile(file));
  w.model = w.profile->name;
  w.model_named = true;
  try {
    compute_time_per_sample(*w.profile, w.device);
  } catch (const std::invalid_argument& e) {
    throw TorchTaskError("task module " + w.numeric->module + ": profile() names " + file + ": " +
                         e.what());
  }
}

void Simulation::keep_world_records(const SimWorld& world) {
  const WorldStats stats = world.stats();
  simulator_events_ = stats.simulator_events;
  simulated_seconds_ = to_seconds(world.now().time_since_epoch());
  world_stats_ = {{"simulator_events", stats.simulator_events},
                  {"messages", stats.messages},
                  {"message_bytes", stats.message_bytes},
                  {"background_bytes", stats.background_bytes},
                  {"dropped_packets", stats.dropped_packets},
                  {"retransmission_timeouts", stats.retransmission_timeouts},
                  {"lost_retransmissions", stats.lost_retransmissions},
                  {"early_losses", stats.early_losses}};
  for (const auto& [name, value] : world.model_counters())
    world_stats_[name] = value;
  if (const auto& samples = world.tcp_samples(); !samples.empty()) {
    tcp_csv_ =
        "time_s,kind,src,dst,flow,cwnd_bytes,ssthresh_bytes,srtt_s,in_flight_bytes,"
        "acked_bytes\n";
    for (const TcpSample& t : samples) {
      tcp_csv_ += fmt::format("{:.6f},{},{},{},{},{},{},{:.9f},{},{}\n", t.time_s, t.kind, t.src,
                              t.dst, t.flow, t.cwnd_bytes, t.ssthresh_bytes, t.srtt_s,
                              t.in_flight_bytes, t.acked_bytes);
    }
  }
}

nlohmann::json Simulation::summary() const {
  const auto& w = scenario_.workload;
  nlohmann::json run = {
      {"scenario", scenario_.name},
      {"seed", scenario_.seed},
      {"world", option_name(scenario_.world)},
      {"flow_tcp", scenario_.world == WorldKind::flow
                       ? nlohmann::json(option_name(scenario_.flow_tcp))
                       : nullptr},
      {"workers",
       recorder_.cluster_steps().empty() ? 0 : recorder_.cluster_steps().front().workers},
      {"model", w.model},
      {"device", w.device},
      {"batch_per_worker", w.batch_per_worker},
      {"strategy", std::string(strategy_name(scenario_.strategy))},
      {"steps", scenario_.steps},
      {"simulation_end_s", simulated_seconds_},
      // No communication at all: every worker computing back to back.
      {"ideal_samples_per_s", per_sample_seconds_ > 0 ? n_workers_ / per_sample_seconds_ : 0.0},
      {"world_stats", world_stats_},
  };
  // Only when it overlaps: the summaries of runs without bucketing stay as they were.
  if (w.bucketing.mode != Bucketing::none) run["bucketing"] = option_name(w.bucketing.mode);
  if (const auto& numeric = scenario_.workload.numeric) {
    // Rank 0's evaluations: the last one, and the first at or above the target.
    nlohmann::json accuracy = nullptr, reached = nullptr, best = nullptr, batch = nullptr;
    for (const auto& s : recorder_.steps()) {
      if (s.rank != 0) continue;
      batch = s.samples;  // the last step's: a batch-size policy may have moved it
      const auto a = s.metrics.values.find("accuracy");
      if (a == s.metrics.values.end()) continue;
      accuracy = a->second;
      if (best.is_null() || a->second > best.get<double>()) best = a->second;
      if (reached.is_null() && numeric->target_accuracy > 0 &&
          a->second >= numeric->target_accuracy) {
        reached = {{"step", s.step}, {"time_s", to_seconds(s.end.time_since_epoch())}};
      }
    }
    run["optimizer"] = scenario_.optimizer;
    run["numeric_model"] = numeric->model;
    run["final_accuracy"] = accuracy;
    run["best_accuracy"] = best;
    run["final_batch_per_worker"] = batch;
    run["target_accuracy"] = numeric->target_accuracy;
    run["time_to_target"] = reached;
  }
  return recorder_.summary(std::move(run), windows_);
}

nlohmann::json Simulation::perf() const {
  return {{"wall_seconds", wall_seconds_},
          // Of wall_seconds, a numeric workload's learning (making its data set, the model's
          // passes): the same in every world.
          {"learning_wall_seconds", learning_wall_seconds_},
          {"simulated_seconds", simulated_seconds_},
          {"simulator_events", simulator_events_},
          {"events_per_wall_second", wall_seconds_ > 0 ? simulator_events_ / wall_seconds_ : 0.0},
          {"simulated_seconds_per_wall_second",
           wall_seconds_ > 0 ? simulated_seconds_ / wall_seconds_ : 0.0}};
}

namespace {

void write_text_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) throw std::runtime_error("error writing " + path);
}

}  // namespace

void Simulation::write(const std::string& dir) const {
  recorder_.write(dir, summary());
  write_text_file(dir + "/perf.json", perf().dump(2) + "\n");
  if (!tcp_csv_.empty()) write_text_file(dir + "/tcp.csv", tcp_csv_);
  if (scenario_.workload.numeric && scenario_.workload.numeric->save_parameters) {
    write_text_file(dir + "/parameters.f32",
                    std::string(reinterpret_cast<const char*>(final_parameters_.data()),
                                final_parameters_.size() * sizeof(float)));
  }
}

}  // namespace kf
