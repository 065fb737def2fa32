// Serializes a ModelProfile in the profile-file schema (sim/scenario/profile_file.cc). Every value
// is written so that it reads back exactly: integers as integers, doubles in fmt's shortest
// round-trip form, durations in whole nanoseconds.
#include "sim/scenario/profile_writer.h"

#include <fmt/format.h>

#include <stdexcept>

namespace kf {

namespace {

// A YAML scalar for `s`: plain when it is a simple name (letters, digits, `_ . / -`, not starting
// with `-` or `.`), else double-quoted with `\` and `"` escaped.
std::string scalar(std::string_view s) {
  const auto simple = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '/' || c == '-';
  };
  bool plain = !s.empty() && s.front() != '-' && s.front() != '.';
  for (const char c : s)
    plain = plain && simple(c);
  if (plain) return std::string(s);
  std::string out = "\"";
  for (const char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string write_profile(const ModelProfile& model, std::string_view comment) {
  if (model.layers.empty()) {
    throw std::invalid_argument("model '" + model.name +
                                "' has no layers to write as a profile file");
  }
  std::string out;
  while (!comment.empty()) {
    const auto nl = comment.find('\n');
    const std::string_view line = comment.substr(0, nl);
    out += line.empty() ? "#\n" : fmt::format("# {}\n", line);
    comment = nl == std::string_view::npos ? std::string_view{} : comment.substr(nl + 1);
  }
  out += fmt::format("name: {}\nlayers:\n", scalar(model.name));
  const bool flops = model.forward_gflops > 0 || model.layers.front().times.empty();
  for (const LayerProfile& l : model.layers) {
    out += fmt::format("  - name: {}\n", scalar(l.name));
    if (l.tensor_count == 1 && model.tensors[l.first_tensor].name == l.name) {
      out += fmt::format("    parameters: {}\n", model.tensors[l.first_tensor].count);
    } else {
      out += "    tensors:\n";
      for (std::size_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t) {
        out += fmt::format("      - {{name: {}, parameters: {}}}\n", scalar(model.tensors[t].name),
                           model.tensors[t].count);
      }
    }
    if (flops) out += fmt::format("    forward_gflops: {}\n", l.forward_gflops);
    if (!l.times.empty()) {
      out += "    times:\n";
      for (const auto& [device, t] : l.times) {
        out += fmt::format("      {}: {{forward: {}ns, backward: {}ns}}\n", scalar(device),
                           t.forward.count(), t.backward.count());
      }
    }
  }
  return out;
}

std::string shipped_profile(std::string_view name) {
  const ModelProfile& model = model_profile(name);
  const std::string n(name);
  return write_profile(
      model,
      n + ": the shipped model (workloads/model.cc) as a profile file, written by\n" +
          "`kfsim --write-profile " + n +
          "`; tests/profile_test.cc checks that it still is. Per layer, in\n"
          "forward order: its gradient tensors (f32 elements) and its forward GFLOPs per sample.\n"
          "Named " +
          n + ", it takes the same per-device calibration as `model: " + n +
          "` (workloads/model.cc);\n"
          "under another name its FLOPs scale ResNet-50's time as a plain model's do. Copy and\n"
          "edit it to describe a model of your own: docs/scenarios.md (workload.profile).");
}

}  // namespace kf
