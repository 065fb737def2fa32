// Gradient bucketing: which gradient tensors travel together in one allreduce, and when in the
// step each bucket may start (workload.bucketing in a scenario; docs/scenarios.md). Every worker
// computes the same plan from the same profile and batch, so buckets are matched across workers by
// name, whatever order they start in.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/time.h"
#include "workloads/model.h"
#include "workloads/step_timeline.h"

namespace kf {

enum class Bucketing : std::uint8_t {
  none,    // compute first, then every bucket at once (buckets of `fusion` bytes): no overlap
  kungfu,  // one named allreduce per tensor, started as soon as its gradient is ready
  ddp,     // PyTorch DDP: buckets in reverse parameter order, each started when full
  horovod  // Horovod: every `cycle`, what is ready is fused into buffers of `fusion_bytes`
};

// Each mode's name, as scenarios (workload.bucketing) and kftrain (--bucketing) spell it.
inline constexpr std::array<std::pair<Bucketing, std::string_view>, 4> kBucketingNames{{
    {Bucketing::none, "none"},
    {Bucketing::kungfu, "kungfu"},
    {Bucketing::ddp, "ddp"},
    {Bucketing::horovod, "horovod"},
}};

struct BucketingOptions {
  Bucketing mode = Bucketing::none;
  // ddp (torch.nn.parallel.DistributedDataParallel's defaults: bucket_cap_mb=25, and
  // dist._DEFAULT_FIRST_BUCKET_BYTES for the first bucket).
  std::size_t bucket_cap = 25u << 20;
  std::size_t first_bucket = 1u << 20;
  // horovod (HOROVOD_FUSION_THRESHOLD and HOROVOD_CYCLE_TIME's defaults).
  std::size_t fusion_bytes = 64u << 20;
  Duration cycle = std::chrono::milliseconds(5);
};

struct GradientBucket {
  std::vector<int> tensors;  // indices into ModelProfile::tensors, in backward order
  Duration ready{0};         // offset in the compute at which its last tensor is ready
};

// The buckets of one step, in the order they become ready, for `timeline` (the step's timeline
// at its nominal compute time). `fusion_bytes` is workload.fusion, for `none` only.
//   none:    fuse_gradients(fusion_bytes), every bucket ready when the compute ends;
//   kungfu:  a bucket per tensor;
//   ddp:     tensors in reverse order are added to a bucket until it holds at least its cap
//            (first_bucket for the first, bucket_cap after), as PyTorch's
//            compute_bucket_assignment_by_size does; a bucket may exceed its cap by one tensor;
//   horovod: the cycle ticks at cycle, 2 x cycle, ... from the start of the compute; a tick takes
//            every tensor ready at or before it and not yet sent, fused in backward order into
//            buffers of at most fusion_bytes (a larger tensor goes alone). The groups are those of
//            the nominal timeline on every worker: Horovod's coordinator makes all ranks agree on
//            each fused response, so no rank fuses differently from the others.
std::vector<GradientBucket> plan_buckets(const ModelProfile& model, const StepTimeline& timeline,
                                         const BucketingOptions& options,
                                         std::size_t fusion_bytes = 0,
                                         std::size_t bytes_per_element = 4);

// The first tick of a Horovod cycle of `cycle` at or after `offset` from the compute's start.
Duration next_cycle(Duration offset, Duration cycle);

}  // namespace kf
