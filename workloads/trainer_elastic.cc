// The trainer's side of elastic membership: run the resize protocol, leave or rebuild the engine
// for the new cluster version, and sync state so every worker resumes at the same step with the
// same model and the same policy history.
#include <fmt/format.h>

#include <algorithm>

#include "runtime/collectives.h"
#include "workloads/trainer.h"

namespace kf {

void Trainer::resize(int workers) {
  if (world_.membership == nullptr) {
    finish(Status(ErrorCode::invalid_argument,
                  fmt::format("resize to {} workers at step {}: this world is not elastic (no "
                              "config service or runners)",
                              workers, step_)));
    return;
  }
  const ClusterSpec before = engine_->cluster();
  resize_cluster(*engine_, *world_.membership, workers, step_,
                 [this, alive = alive_, before](Status s, ClusterSpec next) {
                   if (!*alive || abandoned_) return;
                   if (!s.ok()) {
                     finish(s);
                     return;
                   }
                   if (engine_->rank() == 0) {
                     observer_.adapted(0, step_, "resize",
                                       fmt::format("{} -> {} workers (cluster version {} -> {})",
                                                   before.size(), next.size(), before.version(),
                                                   next.version()),
                                       world_.executor.now());
                   }
                   rebuild(std::move(next));
                 });
}

void Trainer::rebuild(ClusterSpec next) {
  const auto rank = next.rank_of(id_);
  if (!rank) {
    observer_.adapted(engine_->rank(), step_, "detached",
                      fmt::format("{} left at cluster version {}", id_.to_string(), next.version()),
                      world_.executor.now());
    detached_ = true;
    engine_.reset();
    world_.membership->leave([this, alive = alive_] {
      if (!*alive) return;
      finished_ = true;
      observer_.worker_finished(-1, Status{}, world_.executor.now());
    });
    return;
  }
  // Peers that switched first may have sent to this worker already: keep those messages.
  auto early = engine_->take_newer_messages();
  const std::vector<PeerID> previous = engine_->cluster().workers();
  engine_.reset();
  world_.membership->reconnect(
      next, *rank,
      [this, alive = alive_, next, rank = *rank, previous, early = std::move(early)](
          Transport& transport) mutable {
        if (!*alive || abandoned_) return;
        build_engine(next, rank, &transport);
        program_->resized(rank, next.size());
        for (auto& [source, message] : early)
          engine_->deliver(source, std::move(message));
        if (rank == 0 && std::find(previous.begin(), previous.end(), id_) == previous.end()) {
          observer_.adapted(0, step_, "warning",
                            "the new rank 0 is a fresh worker: the model it broadcasts is its "
                            "initial one",
                            world_.executor.now());
        }
        sync([this] {
          policies_.applied(Resize{.workers = engine_->size()}, state());
          begin_step();
        });
      });
}

namespace {

struct SyncRound {
  std::int64_t step = 0;
  std::vector<double> state;  // batch, learning rate, then the policies' history
  std::size_t pending = 0;
  Status error;
};

}  // namespace

// Every worker of the new cluster, survivors and new ones: the step counter by allreduce-max,
// then the settings and policy history and the model by broadcast from rank 0.
void Trainer::sync(std::function<void()> then) {
  auto round = std::make_shared<SyncRound>();
  round->step = step_;
  const std::uint64_t version = engine_->cluster().version();
  const auto step_view = BufferView(reinterpret_cast<std::byte*>(&round->step), 1, DType::i64);
  auto fail_or = [this, alive = alive_, round](Status s, const std::function<void()>& next) {
    if (!*alive || abandoned_) return;
    if (!s.ok()) {
      finish(s);
      return;
    }
    next();
  };
  const auto broadcast_model = [this, round, version, fail_or, then] {
    const std::vector<BufferView> state = program_->state();
    round->pending = state.size();
    if (round->pending == 0) {
      then();
      return;
    }
    for (std::size_t i = 0; i < state.size(); ++i) {
      broadcast(*engine_,
                {.name = fmt::format("kf.sync/{}/{}", i, version), .input = state[i], .output = state[i]},
                [round, fail_or, then](Status s) {
                  if (!s.ok() && round->error.ok()) round->error = s;
                  if (--round->pending > 0) return;
                  fail_or(round->error, then);
                });
    }
  };
  const auto broadcast_state = [this, round, version, fail_or, broadcast_model] {
    step_ = round->step;
    round->state = {static_cast<double>(batch_per_worker_), learning_rate_};
    const auto history = policies_.save_state();
    round->state.insert(round->state.end(), history.begin(), history.end());
    const auto view = BufferView::of(std::span<double>(round->state), DType::f64);
    broadcast(*engine_, {.name = fmt::format("kf.sync.state/{}", version), .input = view, .output = view},
              [this, round, fail_or, broadcast_model](Status s) {
                fail_or(s, [this, round, broadcast_model] {
                  batch_per_worker_ = static_cast<int>(round->state[0]);
                  learning_rate_ = round->state[1];
                  policies_.load_state(std::span<const double>(round->state).subspan(2));
                  broadcast_model();
                });
              });
  };
  allreduce(*engine_,
            {.name = fmt::format("kf.sync.step/{}", version),
             .input = step_view,
             .output = step_view,
             .op = ReduceOp::max},
            [fail_or, broadcast_state](Status s) { fail_or(s, broadcast_state); });
}

}  // namespace kf
