// GradientProgram: the step of a profiled model (workloads/model.h): allreduce one buffer per
// gradient tensor (or fused bucket), each under its own name and all at once, the bytes real or
// phantom. With verify, each bucket is filled with (rank + 1 + step % 5) and every element of
// the sum is checked.
#pragma once

#include "workloads/model.h"
#include "workloads/step_program.h"

namespace kf {

class GradientProgram final : public StepProgram {
 public:
  GradientProgram(const ModelProfile& model, std::size_t fusion_bytes, bool phantom, bool verify);

  std::function<void()> compute(std::int64_t, int) override { return {}; }
  void communicate(const StepContext& context, DoneCallback done) override;
  std::vector<BufferView> state() override;

 private:
  void fill(std::size_t bucket, int rank, std::int64_t step);
  Status check(std::size_t bucket, int rank, int size, std::int64_t step) const;

  std::vector<Buffer> buckets_;
  std::vector<std::string> names_;
  bool verify_;
};

}  // namespace kf
