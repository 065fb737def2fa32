// Workload profiles: what a model costs a worker each step. The gradient tensors have the model's
// real per-layer sizes (built from the architecture, so the parameter counts are exact), and the
// compute time per sample comes from a per-device calibration whose source is stated in
// model.cc. The simulated world moves these tensors (usually as phantoms); the real world can
// allocate them for real.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace kf {

struct GradientTensor {
  std::string name;   // "conv1/kernel", "layer3.2.bn2/gamma", ...
  std::size_t count;  // elements
};

// One layer of the forward pass: its trainable tensors (a run of ModelProfile::tensors) and what
// it costs. The backward pass walks the layers in reverse; a layer's gradients are ready once its
// backward is done (workloads/step_timeline.h).
struct LayerProfile {
  std::string name;              // "conv1", "layer2.1.bn2"
  std::size_t first_tensor = 0;  // its tensors: [first_tensor, first_tensor + tensor_count)
  std::size_t tensor_count = 0;
  double forward_gflops = 0;  // per sample, 2 x multiply-accumulates; 0 for norms, embeddings
  // Measured per sample on a device (a profile file's), by device name; preferred to FLOPs.
  struct Times {
    std::chrono::nanoseconds forward{0}, backward{0};
  };
  std::map<std::string, Times, std::less<>> times;
};

struct ModelProfile {
  std::string name;                     // "resnet50"
  std::vector<GradientTensor> tensors;  // forward order; backprop produces them in reverse
  double forward_gflops = 0;            // per sample, 2 x multiply-accumulates
  // Forward order, covering `tensors` in order. Empty (a synthetic workload): every tensor is a
  // layer of its own whose cost is unknown.
  std::vector<LayerProfile> layers;
  std::size_t parameter_count() const;
};

// Known models: resnet50, vgg16, inception_v3, mobilenet_v2, bert_base, resnet56.
// Throws std::invalid_argument naming the known ones for any other name.
const ModelProfile& model_profile(std::string_view name);
std::vector<std::string> model_names();

// Known devices: k80, v100, h100. Forward + backward time of one sample of `model` on `device`.
// Throws std::invalid_argument naming the known devices for any other name.
std::chrono::nanoseconds compute_time_per_sample(const ModelProfile& model,
                                                 std::string_view device);
std::vector<std::string> device_names();

// Gradient fusion: consecutive tensors, in backprop order (last layer first), packed into buckets
// of at most `bucket_bytes` (a tensor larger than a bucket is a bucket alone). bucket_bytes == 0:
// one bucket per tensor. Returns tensor indices per bucket, in the order buckets become ready.
std::vector<std::vector<int>> fuse_gradients(const ModelProfile& model, std::size_t bucket_bytes,
                                             std::size_t bytes_per_element = 4);

}  // namespace kf
