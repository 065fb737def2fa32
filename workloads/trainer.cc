#include "workloads/trainer.h"

#include <fmt/format.h>

#include <numeric>
#include <stdexcept>

#include "runtime/collectives.h"

namespace kf {

Trainer::Trainer(Engine& engine, Compute& compute, TrainerOptions options,
                 TrainingObserver& observer)
    : engine_(engine), compute_(compute), options_(options), observer_(observer) {
  if (options_.model == nullptr) throw std::invalid_argument("trainer: no model");
  for (const auto& bucket : fuse_gradients(*options_.model, options_.fusion_bytes)) {
    std::size_t count = 0;
    for (int t : bucket)
      count += options_.model->tensors[static_cast<std::size_t>(t)].count;
    buckets_.push_back(options_.phantom ? Buffer::phantom(count, DType::f32)
                                        : Buffer(count, DType::f32));
    // Named after the first tensor so traces read like the model.
    bucket_names_.push_back(fmt::format(
        "grad/{}", options_.model->tensors[static_cast<std::size_t>(bucket.front())].name));
  }
}

void Trainer::start() {
  begin_step();
}

void Trainer::begin_step() {
  if (abandoned_) return;
  if (step_ >= options_.steps) {
    finish(Status{});
    return;
  }
  current_ = StepRecord{.rank = engine_.rank(),
                        .step = step_,
                        .begin = engine_.executor().now(),
                        .samples = options_.batch_per_worker,
                        .strategy = engine_.strategy()->strategy().name,
                        .cluster_size = engine_.size()};
  observer_.step_started(engine_.rank(), step_, current_.begin);
  const auto profiled = options_.compute_per_sample * options_.batch_per_worker;
  compute_.run({.step = step_, .samples = options_.batch_per_worker, .profiled = profiled},
               [this] { allreduce_gradients(); });
}

void Trainer::allreduce_gradients() {
  if (abandoned_) return;
  current_.compute_end = engine_.executor().now();
  pending_ = buckets_.size();
  step_error_ = Status{};
  if (pending_ == 0) {
    bucket_done(0, current_.compute_end, Status{});
    return;
  }
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const TimePoint begin = engine_.executor().now();
    BufferView view = buckets_[b].view();
    allreduce(engine_, {.name = bucket_names_[b], .input = view, .output = view},
              [this, b, begin](Status s) { bucket_done(b, begin, s); });
  }
}

void Trainer::bucket_done(std::size_t bucket, TimePoint begin, const Status& status) {
  if (abandoned_) return;
  if (!status.ok() && step_error_.ok()) step_error_ = status;
  if (bucket < buckets_.size()) {
    observer_.collective_finished({.rank = engine_.rank(),
                                   .step = step_,
                                   .name = bucket_names_[bucket],
                                   .bytes = buckets_[bucket].size_bytes(),
                                   .begin = begin,
                                   .end = engine_.executor().now(),
                                   .strategy = current_.strategy});
  }
  if (pending_ > 0 && --pending_ > 0) return;
  if (!step_error_.ok()) {
    finish(step_error_);
    return;
  }
  current_.end = engine_.executor().now();
  observer_.step_finished(current_);
  ++step_;
  begin_step();
}

void Trainer::finish(const Status& status) {
  if (finished_) return;
  finished_ = true;
  observer_.worker_finished(engine_.rank(), status, engine_.executor().now());
}

}  // namespace kf
