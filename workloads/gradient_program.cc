#include "workloads/gradient_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "runtime/collectives.h"

namespace kf {

GradientProgram::GradientProgram(const ModelProfile& model, std::size_t fusion_bytes,
                                 bool phantom, bool verify)
    : verify_(verify) {
  if (verify && phantom)
    throw std::invalid_argument("verify needs real gradients (phantom = false)");
  for (const auto& bucket : fuse_gradients(model, fusion_bytes)) {
    std::size_t count = 0;
    for (int t : bucket)
      count += model.tensors[static_cast<std::size_t>(t)].count;
    buckets_.push_back(phantom ? Buffer::phantom(count, DType::f32) : Buffer(count, DType::f32));
    // Named after the first tensor so traces read like the model.
    names_.push_back(
        fmt::format("grad/{}", model.tensors[static_cast<std::size_t>(bucket.front())].name));
  }
}

std::vector<BufferView> GradientProgram::state() {
  std::vector<BufferView> out;
  for (auto& b : buckets_)
    out.push_back(b.view());
  return out;
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
  struct Round {
    std::size_t pending;
    Status error;
  };
  auto round = std::make_shared<Round>(Round{buckets_.size(), Status{}});
  Engine& engine = ctx.engine;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (verify_) fill(b, engine.rank(), ctx.step);
    const TimePoint begin = engine.executor().now();
    BufferView view = buckets_[b].view();
    allreduce(engine, {.name = names_[b], .input = view, .output = view},
              [this, b, begin, round, done, &engine, step = ctx.step, report = ctx.report](Status s) {
                if (s.ok() && verify_) s = check(b, engine.rank(), engine.size(), step);
                if (!s.ok() && round->error.ok()) round->error = s;
                report(names_[b], buckets_[b].size_bytes(), begin, engine.executor().now());
                if (--round->pending == 0) done(round->error);
              });
  }
}

}  // namespace kf
