#include "workloads/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "runtime/collectives.h"
#include "topology/forest.h"
#include "workloads/gradient_program.h"

namespace kf {

Trainer::Trainer(ClusterSpec cluster, int rank, TrainerWorld world, TrainerOptions options,
                 PolicyRunner policies, TrainingObserver& observer)
    : id_(cluster.worker(rank)),
      world_(world),
      options_(options),
      policies_(std::move(policies)),
      observer_(observer),
      batch_per_worker_(options.batch_per_worker),
      learning_rate_(options.learning_rate) {
  if (options_.model == nullptr && !options_.program)
    throw std::invalid_argument("trainer: no model and no program");
  if (world_.transport == nullptr && world_.membership == nullptr)
    throw std::invalid_argument("trainer: the world gave no transport");
  build_engine(cluster, rank);
  program_ = options_.program ? options_.program(rank, cluster.size())
                              : std::make_unique<GradientProgram>(
                                    *options_.model, options_.fusion_bytes, options_.phantom,
                                    options_.verify, options_.bucketing, options_.device);
}

Trainer::~Trainer() {
  *alive_ = false;
  abandoned_ = true;
  engine_.reset();
}

void Trainer::build_engine(const ClusterSpec& cluster, int rank, Transport* transport) {
  if (transport == nullptr) {
    transport = world_.membership ? &world_.membership->transport(cluster, rank) : world_.transport;
  }
  engine_ = std::make_unique<Engine>(cluster, rank, world_.executor, *transport, options_.engine);
  monitor_.reset_latencies(cluster.size());
}

TrainingState Trainer::state() const {
  return {.step = step_,
          .epoch = options_.steps_per_epoch > 0 ? step_ / options_.steps_per_epoch : 0,
          .total_steps = options_.steps,
          .rank = engine_->rank(),
          .cluster_size = engine_->size(),
          .max_cluster_size = world_.membership ? world_.membership->capacity() : engine_->size(),
          .host_of = engine_->cluster().host_of(),
          .strategy = engine_->strategy()->strategy().name,
          .configured_strategy = options_.engine.strategy,
          .batch_per_worker = batch_per_worker_,
          .learning_rate = learning_rate_};
}

void Trainer::start() {
  policies_.before_train(state());
  if (options_.joining) {
    sync([this] {
      observer_.adapted(engine_->rank(), step_, "joined",
                        fmt::format("{} joined cluster version {} as rank {}", id_.to_string(),
                                    engine_->cluster().version(), engine_->rank()),
                        world_.executor.now());
      policies_.applied(Resize{.workers = engine_->size()}, state());
      begin_step();
    });
    return;
  }
  program_->start(*engine_, [this, alive = alive_](Status s) {
    if (!*alive || abandoned_) return;
    if (!s.ok()) {
      finish(s);
      return;
    }
    begin_step();
  });
}

void Trainer::abandon() {
  abandoned_ = true;
  engine_.reset();
}

void Trainer::begin_step() {
  if (abandoned_) return;
  if (stop_requested_ || step_ >= options_.steps) {
    policies_.after_train(state());
    // Nobody leaves while a peer may still need it (pair averaging asks peers for their model at
    // any time): a barrier, then done.
    barrier(*engine_, fmt::format("kf.end/{}", engine_->cluster().version()),
            [this, alive = alive_](Status s) {
              if (*alive && !abandoned_) finish(s);
            });
    return;
  }
  if (options_.steps_per_epoch > 0 && step_ % options_.steps_per_epoch == 0) {
    if (step_ > 0) policies_.after_epoch(state());
    policies_.before_epoch(state());
  }
  policies_.before_step(state());
  current_ = StepRecord{.rank = engine_->rank(),
                        .step = step_,
                        .begin = world_.executor.now(),
                        .samples = batch_per_worker_,
                        .strategy = engine_->strategy()->strategy().name,
                        .cluster_size = engine_->size()};
  monitor_.begin_step(step_, current_.begin, *engine_);
  observer_.step_started(engine_->rank(), step_, current_.begin);
  if (options_.ping_every > 0 && step_ % options_.ping_every == 0) probe_latencies();
  const auto profiled = options_.compute_per_sample * batch_per_worker_;
  program_->begin(context());
  ComputeWork work{.step = step_,
                   .samples = batch_per_worker_,
                   .profiled = profiled,
                   .numeric = program_->compute(step_, batch_per_worker_)};
  work.marks = program_->ready_marks(profiled);
  // An overlapped step has a timeline, whether marks or the program itself start its collectives.
  current_.timeline = program_->timeline();
  if (!work.marks.empty()) {
    work.at_mark = [this, alive = alive_](std::size_t mark) {
      if (*alive && !abandoned_) program_->ready(context(), mark);
    };
  }
  world_.compute.run(std::move(work), [this, alive = alive_] {
    if (*alive) communicate();
  });
}

void Trainer::probe_latencies() {
  for (int peer = 0; peer < engine_->size(); ++peer) {
    if (peer == engine_->rank()) continue;
    ping(*engine_, {.peer = peer}, [this, peer, alive = alive_](Status s, Duration rtt) {
      if (*alive && !abandoned_ && s.ok()) monitor_.set_latency(peer, rtt);
    });
  }
}

StepContext Trainer::context() {
  return {.engine = *engine_,
          .step = step_,
          .batch_per_worker = batch_per_worker_,
          .learning_rate = learning_rate_,
          .report =
              [this](const std::string& name, std::size_t bytes, TimePoint begin, TimePoint end) {
                if (abandoned_) return;
                observer_.collective_finished({.rank = engine_->rank(),
                                               .step = step_,
                                               .name = name,
                                               .bytes = bytes,
                                               .begin = begin,
                                               .end = end,
                                               .strategy = current_.strategy});
                monitor_.collective_done(current_.strategy, bytes, begin, end);
                if (current_.timeline) {
                  current_.comm_begin = std::min(current_.comm_begin.value_or(begin), begin);
                }
              },
          .step_begin = current_.begin,
          .after =
              [this, alive = alive_](Duration delay, std::function<void()> task) {
                world_.executor.post_after(delay, [this, alive, task = std::move(task)] {
                  if (*alive && !abandoned_) task();
                });
              }};
}

void Trainer::communicate() {
  if (abandoned_) return;
  current_.compute_end = world_.executor.now();
  program_->communicate(context(), [this, alive = alive_](Status s) {
    if (*alive) communicated(s);
  });
}

void Trainer::communicated(const Status& status) {
  if (abandoned_) return;
  if (!status.ok()) {
    finish(status);
    return;
  }
  std::map<std::string, double> values;
  program_->values(values);
  for (const auto& [name, value] : values)
    monitor_.set_value(name, value);
  metrics_ = monitor_.end_step(current_.compute_end, world_.executor.now(), *engine_,
                               current_.samples, batch_per_worker_, learning_rate_);
  if (policies_.empty()) {
    record_step({});
    ++step_;
    begin_step();
    return;
  }
  policies_.after_step(*engine_, metrics_, state(),
                       [this, alive = alive_](Status s, PolicyOutcome outcome) {
                         if (!*alive || abandoned_) return;
                         if (!s.ok()) {
                           finish(s);
                           return;
                         }
                         record_step(outcome);
                         ++step_;
                         apply(std::move(outcome.actions));
                       });
}

void Trainer::record_step(const PolicyOutcome& outcome) {
  current_.end = world_.executor.now();
  current_.metrics = metrics_;
  for (std::size_t i = 0; i < outcome.sums.size(); ++i)
    current_.policy_sums += fmt::format("{}{:g}", i ? ";" : "", outcome.sums[i]);
  for (std::size_t i = 0; i < outcome.actions.size(); ++i)
    current_.actions += (i ? "; " : "") + describe(outcome.actions[i]);
  observer_.step_finished(current_);
}

// Runs before step_ (already the next step) on every worker alike.
void Trainer::apply(std::vector<Action> actions) {
  std::optional<int> resize_to;
  for (const Action& action : actions) {
    const int rank = engine_->rank();
    const TimePoint now = world_.executor.now();
    std::visit(
        Overloaded{
            [&](const SwitchStrategy& a) {
              const std::string from = engine_->strategy()->strategy().name;
              Strategy next = a.name ? make_strategy(*a.name, engine_->cluster().host_of())
                                     : strategy_from_forest(a.forest);
              next.name = a.label;
              engine_->set_strategy(std::move(next));
              observer_.adapted(rank, step_, "switch", fmt::format("{} -> {}", from, a.label), now);
            },
            [&](const Resize& a) { resize_to = a.workers; },
            [&](const SetBatchSize& a) {
              observer_.adapted(rank, step_, "batch",
                                fmt::format("{} -> {} per worker", batch_per_worker_, a.per_worker),
                                now);
              batch_per_worker_ = a.per_worker;
            },
            [&](const SetLearningRate& a) {
              observer_.adapted(rank, step_, "lr",
                                fmt::format("{:g} -> {:g}", learning_rate_, a.value), now);
              learning_rate_ = a.value;
            },
            [&](const StopTraining& a) {
              observer_.adapted(rank, step_, "stop", a.reason, now);
              stop_requested_ = true;
            },
        },
        action);
    if (!std::holds_alternative<Resize>(action)) policies_.applied(action, state());
  }
  if (resize_to && *resize_to != engine_->size()) {
    resize(*resize_to);
    return;
  }
  begin_step();
}

void Trainer::finish(const Status& status) {
  if (finished_) return;
  finished_ = true;
  const int rank = engine_ ? engine_->rank() : -1;
  observer_.worker_finished(rank, status, world_.executor.now());
}

}  // namespace kf
