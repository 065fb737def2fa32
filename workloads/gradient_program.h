// GradientProgram: the step of a profiled model (workloads/model.h): allreduce one buffer per
// gradient bucket, each under its own name, the bytes real or phantom. With bucketing none every
// bucket (of `fusion_bytes`) starts after the compute, all at once; with kungfu, ddp or horovod
// (workloads/bucketing.h) each starts as the backward pass makes its gradients ready. With verify,
// each bucket is filled with (rank + 1 + step % 5) and every element of the sum is checked.
#pragma once

#include <memory>
#include <string>

#include "workloads/bucketing.h"
#include "workloads/model.h"
#include "workloads/step_program.h"
#include "workloads/step_timeline.h"

namespace kf {

class GradientProgram final : public StepProgram {
 public:
  // `model` must outlive the program. `device` picks a profile's per-layer times (step_timeline.h).
  GradientProgram(const ModelProfile& model, std::size_t fusion_bytes, bool phantom, bool verify,
                  BucketingOptions bucketing = {}, std::string device = {});

  std::function<void()> compute(std::int64_t, int) override { return {}; }
  std::vector<Duration> ready_marks(Duration compute) override;
  void ready(const StepContext& context, std::size_t mark) override;
  void communicate(const StepContext& context, DoneCallback done) override;
  std::vector<BufferView> state() override;
  // The timeline the last ready_marks() planned with (none before, or with bucketing none).
  std::shared_ptr<const StepTimeline> timeline() const override { return timeline_; }

 private:
  // The step's collectives: how many are still running, the first error, and who waits for them.
  struct Round {
    std::size_t pending = 0;
    Status error;
    DoneCallback done;  // set by communicate()
  };
  void plan(Duration compute);
  void make_buffers(const std::vector<GradientBucket>& buckets);
  void launch(const StepContext& context, std::size_t bucket);
  void fill(std::size_t bucket, int rank, std::int64_t step);
  Status check(std::size_t bucket, int rank, int size, std::int64_t step) const;

  const ModelProfile& model_;
  std::size_t fusion_bytes_;
  bool phantom_;
  bool verify_;
  BucketingOptions bucketing_;
  std::string device_;
  std::vector<std::vector<int>> groups_;  // each bucket's tensors
  std::vector<Buffer> buckets_;
  std::vector<std::string> names_;
  // Overlap: the plan for `planned_` of compute, and this step's state.
  Duration planned_{-1};
  std::shared_ptr<const StepTimeline> timeline_;
  std::vector<Duration> marks_;
  std::vector<std::vector<std::size_t>> mark_buckets_;  // the buckets ready at each mark
  std::vector<bool> launched_;
  std::shared_ptr<Round> round_;
};

}  // namespace kf
