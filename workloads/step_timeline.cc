#include "workloads/step_timeline.h"

#include <cmath>
#include <cstdint>

namespace kf {

namespace {

// One layer's share of the step: integer weights of its forward and backward passes, in one unit
// for the whole model (nanoseconds, thousands of FLOPs or parameters), so the shares are exact.
struct Weights {
  std::uint64_t forward = 0, backward = 0;
};

std::vector<LayerProfile> layers_of(const ModelProfile& model) {
  if (!model.layers.empty()) return model.layers;
  std::vector<LayerProfile> out;
  for (std::size_t t = 0; t < model.tensors.size(); ++t) {
    out.push_back({.name = model.tensors[t].name, .first_tensor = t, .tensor_count = 1});
  }
  return out;
}

std::uint64_t parameters(const ModelProfile& model, const LayerProfile& layer) {
  std::uint64_t n = 0;
  for (std::size_t t = layer.first_tensor; t < layer.first_tensor + layer.tensor_count; ++t)
    n += model.tensors[t].count;
  return n;
}

// Measured times when every layer has them for `device`; else FLOPs when the model has any; else
// parameters (see the header).
std::vector<Weights> weights(const ModelProfile& model, const std::vector<LayerProfile>& layers,
                             std::string_view device) {
  std::vector<Weights> w(layers.size());
  bool timed = !layers.empty();
  for (const auto& l : layers)
    timed = timed && l.times.find(device) != l.times.end();
  if (timed) {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& t = layers[i].times.find(device)->second;
      w[i] = {static_cast<std::uint64_t>(t.forward.count()),
              static_cast<std::uint64_t>(t.backward.count())};
    }
    return w;
  }
  bool flops = false;
  for (const auto& l : layers)
    flops = flops || l.forward_gflops > 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const std::uint64_t f =
        flops ? static_cast<std::uint64_t>(std::llround(layers[i].forward_gflops * 1e6))
              : parameters(model, layers[i]);
    w[i] = {f, 2 * f};
  }
  return w;
}

}  // namespace

StepTimeline step_timeline(const ModelProfile& model, std::string_view device, Duration compute) {
  const std::vector<LayerProfile> layers = layers_of(model);
  const std::vector<Weights> w = weights(model, layers, device);
  unsigned __int128 total = 0;
  for (const auto& x : w)
    total += x.forward + x.backward;
  StepTimeline tl;
  tl.compute = compute;
  tl.ready.assign(model.tensors.size(), compute);
  if (total == 0) {
    tl.forward_end = compute;
    return tl;
  }
  // floor(compute x elapsed / total): 128 bits, as compute (ns) x weights can pass 2^64.
  const auto at = [&](unsigned __int128 elapsed) {
    return Duration(static_cast<std::int64_t>(static_cast<unsigned __int128>(compute.count()) *
                                              elapsed / total));
  };
  unsigned __int128 elapsed = 0;
  for (const auto& x : w)
    elapsed += x.forward;
  tl.forward_end = at(elapsed);
  for (std::size_t i = layers.size(); i-- > 0;) {
    const Duration begin = at(elapsed);
    elapsed += w[i].backward;
    const Duration end = at(elapsed);
    tl.backward.push_back({.name = layers[i].name,
                           .begin = begin,
                           .end = end,
                           .first_tensor = layers[i].first_tensor,
                           .tensor_count = layers[i].tensor_count});
    for (std::size_t t = layers[i].first_tensor;
         t < layers[i].first_tensor + layers[i].tensor_count; ++t)
      tl.ready[t] = end;
  }
  return tl;
}

}  // namespace kf
