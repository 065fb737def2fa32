// A training step as a timeline: the forward pass, then the backward pass layer by layer in
// reverse, each layer's gradients ready when its backward ends, then the optimizer update. Pure
// computation on a ModelProfile: what the gradient buckets' launch times (workloads/bucketing.h)
// and the records' layer spans are made of.
//
// How the step's compute time is shared out, in this order of preference:
//   - per-layer measured times (a profile file's `forward` and `backward` for the device), as
//   given;
//   - per-layer FLOPs: forward takes 1/3 of the step and backward 2/3 (a layer's backward does
//     twice its forward's multiply-accumulates: the gradients of its input and of its weights),
//     each shared by the layers' forward FLOPs, so a layer with no FLOPs (a norm, an embedding)
//     takes no time;
//   - parameters, when the profile knows no FLOPs (a synthetic `tensors` workload): the same
//     1/3 : 2/3 split, shared by parameter counts, the only size such a workload has.
// The optimizer update takes no time of its own: the calibrated times per sample
// (workloads/model.cc) are whole training steps, and an S-SGD update is one pass over the
// parameters, small beside them. The update runs after the step's last allreduce, and the next
// step's forward waits for it, as PyTorch DDP, Horovod and KungFu do by default.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/time.h"
#include "workloads/model.h"

namespace kf {

struct LayerSpan {
  std::string name;
  Duration begin{0}, end{0};  // offsets within the step's compute
  // Its tensors (indices into ModelProfile::tensors): [first_tensor, first_tensor + tensor_count),
  // all ready at `end`.
  std::size_t first_tensor = 0, tensor_count = 0;
};

struct StepTimeline {
  Duration compute{0};              // the whole compute: forward + backward
  Duration forward_end{0};          // the backward pass starts here
  std::vector<Duration> ready;      // per tensor (as ModelProfile::tensors): its gradient is ready
  std::vector<LayerSpan> backward;  // each layer's backward, in backward order (last layer first)
};

// The timeline of one step whose compute takes `compute`, on `device` (for per-layer times a
// profile gives per device). Offsets are whole nanoseconds, each the floor of its exact share, so
// the last layer's backward ends at `compute` exactly.
StepTimeline step_timeline(const ModelProfile& model, std::string_view device, Duration compute);

}  // namespace kf
