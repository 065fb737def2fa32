#include "sim/simulation.h"

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <stdexcept>

#include "runtime/engine.h"
#include "sim/flow/flow_world.h"
#include "sim/sim_membership.h"
#include "sim/timed_numeric_model.h"
#ifdef KF_WITH_NS3
#include "sim/ns3/ns3_world.h"
#endif
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

std::string describe(const Trigger& t) {
  if (t.step) return fmt::format("step {}", *t.step);
  return fmt::format("{:.6f}s", to_seconds(*t.time));
}

// The scenario's numeric task: its model and data, made once and shared by every worker. Making
// the data and the model's passes add their wall time to `learning_seconds`.
NumericOptions numeric_options(const Scenario& sc, std::shared_ptr<double> learning_seconds) {
  const NumericConfig& c = *sc.workload.numeric;
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
  auto train = std::make_shared<Dataset>(std::move(tr));
  auto test = std::make_shared<Dataset>(std::move(te));
  return {.model = std::make_shared<TimedNumericModel>(
              make_numeric_model(c.model, train->features, train->classes, c.hidden),
              std::move(learning_seconds)),
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
                            : model_profile(sc.workload.model).parameter_count() * sizeof(float)};
}

// The world the scenario names: the packet-level ns-3 one or the flow-level one.
std::unique_ptr<SimWorld> make_world(const Scenario& sc, const PhysicalTopology& topo) {
  switch (sc.world) {
    case WorldKind::flow:
      return std::make_unique<FlowWorld>(
          topo, FlowOptions{.seed = sc.seed,
                            .compute_jitter = sc.workload.compute_jitter,
                            .tcp_windows = sc.flow_tcp == FlowSharing::cubic,
                            .lossless_hosts = sc.topology.host_qdisc == HostQdisc::tsq,
                            .tcp_sample_every = sc.tcp_samples});
    case WorldKind::ns3:
#ifdef KF_WITH_NS3
      return std::make_unique<Ns3World>(topo,
                                        Ns3Options{.seed = sc.seed,
                                                   .compute_jitter = sc.workload.compute_jitter,
                                                   .host_qdisc = sc.topology.host_qdisc,
                                                   .loss_recovery = sc.tcp_recovery,
                                                   .tcp_sample_every = sc.tcp_samples});
#else
      throw std::invalid_argument("world 'ns3' is not built in (no ns-3 here): use world: flow");
#endif
  }
  throw std::invalid_argument("unknown world");
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

void Simulation::run(const std::function<void(const SimulationProgress&)>& progress) {
  const auto wall_start = std::chrono::steady_clock::now();
  const auto learning_seconds = std::make_shared<double>(0.0);
  const PhysicalTopology topo = build_topology(scenario_.topology);
  const std::unique_ptr<SimWorld> world_owner = make_world(scenario_, topo);
  SimWorld& world = *world_owner;
  const int slots = world.workers();
  const auto [slot_ids, runners] = slots_of(topo);
  const int initial =
      scenario_.elastic.initial_workers > 0 ? scenario_.elastic.initial_workers : slots;
  const ClusterSpec cluster = initial_cluster(slot_ids, runners, initial);
  n_workers_ = initial;
  const ModelProfile& profile = model_profile(scenario_.workload.model);
  // workload.tensors: a synthetic model whose gradients are exactly those tensors (f32).
  ModelProfile synthetic{.name = "tensors", .tensors = {}, .forward_gflops = 0};
  for (std::size_t i = 0; i < scenario_.workload.tensor_bytes.size(); ++i) {
    synthetic.tensors.push_back(GradientTensor{.name = "tensor" + std::to_string(i),
                                               .count = scenario_.workload.tensor_bytes[i] / 4});
  }
  const ModelProfile& model = synthetic.tensors.empty() ? profile : synthetic;
  // workload.compute: the step's time, spread over the batch (a whole step of it per step).
  const auto per_sample = scenario_.workload.compute
                              ? *scenario_.workload.compute / scenario_.workload.batch_per_worker
                              : compute_time_per_sample(profile, scenario_.workload.device);
  per_sample_seconds_ = to_seconds(per_sample);
  TrainerOptions trainer_options{.model = &model,
                                 .batch_per_worker = scenario_.workload.batch_per_worker,
                                 .fusion_bytes = scenario_.workload.fusion_bytes,
                                 .phantom = scenario_.workload.phantom,
                                 .steps = scenario_.steps,
                                 .compute_per_sample = per_sample,
                                 .engine = {.chunk_bytes = scenario_.chunk_bytes,
                                            .timeout = scenario_.timeout,
                                            .strategy = scenario_.strategy},
                                 .ping_every = scenario_.ping_every};
  if (scenario_.workload.numeric) {
    trainer_options.learning_rate = scenario_.workload.numeric->learning_rate;
    trainer_options.program = [numeric = numeric_options(scenario_, learning_seconds)](int rank,
                                                                                       int size) {
      return std::make_unique<NumericProgram>(numeric, rank, size);
    };
  }

  // Trainers by slot; a slot's trainer is replaced when a worker starts there again.
  std::vector<std::unique_ptr<Trainer>> trainers(static_cast<std::size_t>(slots));
  std::unique_ptr<SimMembership> membership;
  const auto start_worker = [&](const ClusterSpec& c, int rank, int slot, bool joining) {
    auto& t = trainers[static_cast<std::size_t>(slot)];
    if (t && !t->finished()) return;  // running: a survivor
    TrainerOptions o = trainer_options;
    o.joining = joining;
    t = std::make_unique<Trainer>(c, rank,
                                  TrainerWorld{.executor = world.executor(),
                                               .compute = world.compute(slot),
                                               .membership = membership.get()},
                                  o, make_policies(scenario_.policies), recorder_);
    Trainer* trainer = t.get();
    world.executor().post([trainer] { trainer->start(); });
  };
  std::map<std::string, int> per_host;
  for (const auto& s : slot_ids)
    ++per_host[s.host];
  membership = std::make_unique<SimMembership>(
      world, slot_ids, cluster,
      SimMembershipOptions{.config_latency = scenario_.elastic.config_latency,
                           .spawn_delay = scenario_.elastic.spawn_delay,
                           .slots_per_host = per_host.begin()->second},
      [&](const ClusterSpec& c, int rank, int slot) { start_worker(c, rank, slot, true); });

  // ---- events: each start / stop is an action fired at its step or time ----
  struct Injection {
    std::function<void()> fire;
  };
  std::multimap<std::int64_t, Injection> at_step;
  std::map<std::string, std::size_t> window_of;
  const auto now = [&world] { return world.now(); };
  const auto record = [&](const ScenarioEvent& e, const std::string& kind, const std::string& phase,
                          const std::string& detail) {
    recorder_.add_event(
        {.time = now(), .kind = kind, .phase = phase, .label = e.label, .detail = detail});
    if (phase == "start" || phase == "at") {
      window_of[e.label] = windows_.size();
      windows_.push_back({.label = e.label, .kind = kind, .start = now()});
    } else if (phase == "stop") {
      windows_[window_of.at(e.label)].stop = now();
    }
  };
  const auto schedule = [&](const Trigger& t, std::function<void()> fire) {
    if (t.step) {
      at_step.emplace(*t.step, Injection{std::move(fire)});
    } else {
      world.executor().post_after(*t.time, std::move(fire));
    }
  };
  auto backgrounds = std::make_shared<std::map<std::string, int>>();
  // The run ends when no trainer is left running (background traffic would go on forever).
  const auto check_done = [&] {
    for (const auto& t : trainers)
      if (t && !t->finished() && t->engine() != nullptr) return;
    world.stop();
  };
  for (const ScenarioEvent& e : scenario_.events) {
    std::visit(
        [&](const auto& ev) {
          using T = std::decay_t<decltype(ev)>;
          if constexpr (std::is_same_v<T, ContentionEvent>) {
            const std::string detail =
                fmt::format("{} -> {}, {} flow(s){}", ev.from, ev.to, ev.flows,
                            ev.rate_bps ? fmt::format(" at {:.0f} bps each", *ev.rate_bps) : "");
            schedule(ev.start, [&, e, ev, detail, backgrounds] {
              (*backgrounds)[e.label] =
                  world.start_background(ev.from, ev.to, ev.rate_bps, ev.flows);
              record(e, "contention", "start", detail);
            });
            if (ev.stop) {
              schedule(*ev.stop, [&, e, backgrounds] {
                world.stop_background(backgrounds->at(e.label));
                record(e, "contention", "stop", "");
              });
            }
          } else if constexpr (std::is_same_v<T, StragglerEvent>) {
            schedule(ev.start, [&, e, ev] {
              world.set_straggler(ev.worker, ev.factor);
              record(e, "straggler", "start",
                     fmt::format("worker {} computes {}x slower", ev.worker, ev.factor));
            });
            if (ev.stop) {
              schedule(*ev.stop, [&, e, ev] {
                world.set_straggler(ev.worker, 1.0);
                record(e, "straggler", "stop", fmt::format("worker {}", ev.worker));
              });
            }
          } else if constexpr (std::is_same_v<T, LinkEvent>) {
            schedule(ev.at, [&, e, ev] {
              world.set_link(ev.link, ev.bandwidth_bps, ev.latency);
              std::string detail = ev.link;
              if (ev.bandwidth_bps)
                detail += fmt::format(" bandwidth {:.0f} bps", *ev.bandwidth_bps);
              if (ev.latency) detail += fmt::format(" latency {:.9f} s", to_seconds(*ev.latency));
              record(e, "link", "at", detail);
            });
          } else if constexpr (std::is_same_v<T, FailEvent>) {
            schedule(ev.at, [&, e, ev] {
              auto& trainer = trainers[static_cast<std::size_t>(ev.worker)];
              if (!trainer || trainer->finished()) return;
              trainer->abandon();
              world.fail(ev.worker);
              record(e, "fail", "at",
                     fmt::format("worker {} died at {}", ev.worker, describe(ev.at)));
              check_done();
            });
          }
        },
        e.what);
  }

  std::int64_t started_step = -1;
  recorder_.on_step_started = [&](int, std::int64_t step, TimePoint) {
    // Step-triggered events fire when the first worker begins that step.
    while (started_step < step) {
      ++started_step;
      const auto [first, last] = at_step.equal_range(started_step);
      for (auto it = first; it != last; ++it)
        it->second.fire();
    }
  };
  std::map<std::int64_t, int> finished_per_step;
  std::int64_t steps_done = 0;
  recorder_.on_step_finished = [&](const StepRecord& s) {
    if (++finished_per_step[s.step] < s.cluster_size) return;
    steps_done = s.step + 1;
    if (progress) {
      progress({.steps_done = steps_done,
                .steps_total = scenario_.steps,
                .simulated_seconds = to_seconds(now().time_since_epoch())});
    }
  };
  recorder_.on_worker_finished = [&](int, const Status&, TimePoint) { check_done(); };

  for (int r = 0; r < cluster.size(); ++r)
    start_worker(cluster, r, membership->slot_of(cluster.worker(r)), false);
  world.run();

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
  // Trainers (and their engines) before the world: engine destructors complete what is pending.
  trainers.clear();
  membership.reset();
  wall_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  learning_wall_seconds_ = *learning_seconds;
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
}

}  // namespace kf
