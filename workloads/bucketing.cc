#include "workloads/bucketing.h"

#include <algorithm>

namespace kf {

Duration next_cycle(Duration offset, Duration cycle) {
  const std::int64_t ticks = (offset.count() + cycle.count() - 1) / cycle.count();
  return cycle * std::max<std::int64_t>(ticks, 1);
}

namespace {

// Tensor indices in backward order (last layer's first).
std::vector<int> backward_order(const ModelProfile& model) {
  std::vector<int> out;
  for (int i = static_cast<int>(model.tensors.size()) - 1; i >= 0; --i)
    out.push_back(i);
  return out;
}

std::size_t bytes_of(const ModelProfile& model, int t, std::size_t bytes_per_element) {
  return model.tensors[static_cast<std::size_t>(t)].count * bytes_per_element;
}

Duration ready_of(const StepTimeline& tl, const std::vector<int>& tensors) {
  Duration r{0};
  for (int t : tensors)
    r = std::max(r, tl.ready[static_cast<std::size_t>(t)]);
  return r;
}

}  // namespace

std::vector<GradientBucket> plan_buckets(const ModelProfile& model, const StepTimeline& timeline,
                                         const BucketingOptions& options, std::size_t fusion_bytes,
                                         std::size_t bytes_per_element) {
  std::vector<GradientBucket> out;
  switch (options.mode) {
    case Bucketing::none:
      for (auto& b : fuse_gradients(model, fusion_bytes, bytes_per_element))
        out.push_back({.tensors = std::move(b), .ready = timeline.compute});
      break;
    case Bucketing::kungfu:
      for (int t : backward_order(model))
        out.push_back({.tensors = {t}, .ready = timeline.ready[static_cast<std::size_t>(t)]});
      break;
    case Bucketing::ddp: {
      GradientBucket current;
      std::size_t bytes = 0;
      for (int t : backward_order(model)) {
        current.tensors.push_back(t);
        bytes += bytes_of(model, t, bytes_per_element);
        if (bytes >= (out.empty() ? options.first_bucket : options.bucket_cap)) {
          current.ready = ready_of(timeline, current.tensors);
          out.push_back(std::move(current));
          current = {};
          bytes = 0;
        }
      }
      if (!current.tensors.empty()) {
        current.ready = ready_of(timeline, current.tensors);
        out.push_back(std::move(current));
      }
      break;
    }
    case Bucketing::horovod: {
      const std::vector<int> order = backward_order(model);
      std::size_t next = 0;
      while (next < order.size()) {
        // The tick that finds the next tensor ready takes every tensor ready by then.
        const Duration tick =
            next_cycle(timeline.ready[static_cast<std::size_t>(order[next])], options.cycle);
        GradientBucket current;
        std::size_t bytes = 0;
        for (; next < order.size() && timeline.ready[static_cast<std::size_t>(order[next])] <= tick;
             ++next) {
          const std::size_t b = bytes_of(model, order[next], bytes_per_element);
          if (!current.tensors.empty() && bytes + b > options.fusion_bytes) {
            current.ready = ready_of(timeline, current.tensors);
            out.push_back(std::move(current));
            current = {};
            bytes = 0;
          }
          current.tensors.push_back(order[next]);
          bytes += b;
        }
        current.ready = ready_of(timeline, current.tensors);
        out.push_back(std::move(current));
      }
      break;
    }
  }
  return out;
}

}  // namespace kf
