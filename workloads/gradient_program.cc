#include "workloads/gradient_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <utility>

#include "runtime/collectives.h"

namespace kf {

namespace {

std::vector<std::vector<int>> tensors_of(const std::vector<GradientBucket>& buckets) {
  std::vector<std::vector<int>> out;
  for (const auto& b : buckets)
    out.push_back(b.tensors);
  return out;
}

}  // namespace

GradientProgram::GradientProgram(const ModelProfile& model, std::size_t fusion_bytes, bool phantom,
                                 bool verify, BucketingOptions bucketing, std::string device)
    : model_(model),
      fusion_bytes_(fusion_bytes),
      phantom_(phantom),
      verify_(verify),
      bucketing_(bucketing),
      device_(std::move(device)) {
  if (verify && phantom)
    throw std::invalid_argument("verify needs real gradients (phantom = false)");
  if (bucketing_.mode == Bucketing::none) {
    std::vector<GradientBucket> buckets;
    for (auto& b : fuse_gradients(model, fusion_bytes))
      buckets.push_back({.tensors = std::move(b)});
    make_buffers(buckets);
  }
}

void GradientProgram::make_buffers(const std::vector<GradientBucket>& buckets) {
  groups_ = tensors_of(buckets);
  buckets_.clear();
  names_.clear();
  for (const auto& bucket : groups_) {
    std::size_t count = 0;
    for (int t : bucket)
      count += model_.tensors[static_cast<std::size_t>(t)].count;
    buckets_.push_back(phantom_ ? Buffer::phantom(count, DType::f32) : Buffer(count, DType::f32));
    // Named after the first tensor so traces read like the model.
    names_.push_back(
        fmt::format("grad/{}", model_.tensors[static_cast<std::size_t>(bucket.front())].name));
  }
}

std::vector<BufferView> GradientProgram::state() {
  std::vector<BufferView> out;
  for (auto& b : buckets_)
    out.push_back(b.view());
  return out;
}

// The plan depends on the compute time only through the timeline (Horovod's groups, every mark),
// so it is made again only when the compute changes (a new batch size).
void GradientProgram::plan(Duration compute) {
  if (compute == planned_) return;
  planned_ = compute;
  auto timeline = std::make_shared<StepTimeline>(step_timeline(model_, device_, compute));
  const std::vector<GradientBucket> buckets =
      plan_buckets(model_, *timeline, bucketing_, fusion_bytes_);
  if (tensors_of(buckets) != groups_) make_buffers(buckets);
  timeline_ = std::move(timeline);
  marks_.clear();
  mark_buckets_.clear();
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    if (marks_.empty() || marks_.back() != buckets[b].ready) {
      marks_.push_back(buckets[b].ready);
      mark_buckets_.emplace_back();
    }
    mark_buckets_.back().push_back(b);
  }
}

std::vector<Duration> GradientProgram::ready_marks(Duration compute) {
  if (bucketing_.mode == Bucketing::none) return {};
  plan(compute);
  launched_.assign(buckets_.size(), false);
  round_ = std::make_shared<Round>(Round{.pending = buckets_.size(), .error = {}, .done = {}});
  return marks_;
}

void GradientProgram::ready(const StepContext& ctx, std::size_t mark) {
  for (const std::size_t b : mark_buckets_[mark]) {
    if (bucketing_.mode != Bucketing::horovod) {
      launch(ctx, b);
      continue;
    }
    // Horovod's background thread sends what is ready at its next cycle.
    const Duration offset = ctx.engine.executor().now() - ctx.step_begin;
    const Duration wait = next_cycle(offset, bucketing_.cycle) - offset;
    ctx.after(wait, [this, ctx, b, round = round_] {
      if (round == round_) launch(ctx, b);
    });
  }
}

void GradientProgram::launch(const StepContext& ctx, std::size_t b) {
  if (launched_[b]) return;
  launched_[b] = true;
  if (verify_) fill(b, ctx.engine.rank(), ctx.step);
  Engine& engine = ctx.engine;
  const TimePoint begin = engine.executor().now();
  BufferView view = buckets_[b].view();
  allreduce(
      engine, {.name = names_[b], .input = view, .output = view},
      [this, b, begin, round = round_, &engine, step = ctx.step, report = ctx.report](Status s) {
        if (s.ok() && verify_) s = check(b, engine.rank(), engine.size(), step);
        if (!s.ok() && round->error.ok()) round->error = s;
        report(names_[b], buckets_[b].size_bytes(), begin, engine.executor().now());
        if (--round->pending == 0 && round->done) round->done(round->error);
      });
}

void GradientProgram::fill(std::size_t bucket, int rank, std::int64_t step) {
  const float value = static_cast<float>(rank + 1 + step % 5);
  auto* data = reinterpret_cast<float*>(buckets_[bucket].view().data());
  std::fill(data, data + buckets_[bucket].view().count(), value);
}

Status GradientProgram::check(std::size_t bucket, int rank, int size, std::int64_t step) const {
  const auto n = static_cast<std::int64_t>(size);
  const auto expected = static_cast<float>(n * (n + 1) / 2 + n * (step % 5));
  const ConstBufferView view = buckets_[bucket].view();
  const auto* data = reinterpret_cast<const float*>(view.data());
  for (std::size_t i = 0; i < view.count(); ++i) {
    if (data[i] != expected) {
      return Status(ErrorCode::protocol,
                    fmt::format("verify: allreduce of {} at step {} on rank {} of {}: element {} "
                                "is {}, expected {}",
                                names_[bucket], step, rank, n, i, data[i], expected));
    }
  }
  return Status{};
}

void GradientProgram::communicate(const StepContext& ctx, DoneCallback done) {
  if (buckets_.empty()) {
    ctx.engine.reject(std::move(done), Status{});
    return;
  }
  if (bucketing_.mode == Bucketing::none) {
    launched_.assign(buckets_.size(), false);
    round_ = std::make_shared<Round>(Round{.pending = buckets_.size(), .error = {}, .done = {}});
    round_->done = std::move(done);
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      launch(ctx, b);
    return;
  }
  // Overlap: the compute's marks started what was ready; Horovod's last groups wait for their
  // cycle. The round ends when the last collective does, or has already ended.
  if (round_->pending == 0) {
    ctx.engine.reject(std::move(done), round_->error);
    return;
  }
  round_->done = std::move(done);
}

}  // namespace kf
