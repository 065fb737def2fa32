// A profile file's schema:
//
//   name: my_model                 # required
//   layers:                        # required, forward order, at least one
//     - name: conv1                # required, unique
//       parameters: 1728           # required, >= 1: the layer's gradient elements (f32)
//       forward_gflops: 0.118      # per sample; on every layer or on none
//       times:                     # per sample, by device; on every layer for the same devices
//         v100: {forward: 40us, backward: 80us}
//
// A layer gives forward_gflops, times or both. With times for the scenario's device, a step's
// compute is their sum and the timeline shares it as they do; else the FLOPs scale the device's
// calibration (workloads/model.cc) and share the step (workloads/step_timeline.h).
#include "sim/scenario/profile_file.h"

#include <limits>
#include <optional>
#include <set>

#include "sim/scenario/scenario.h"
#include "sim/scenario/yaml_reader.h"

namespace kf {

namespace {

using yaml::describe;
using yaml::MapView;
using YAML::Node;

class ProfileReader : public yaml::Reader {
 public:
  explicit ProfileReader(std::string file)
      : Reader(std::move(file), std::numeric_limits<std::int64_t>::max()) {}

  ModelProfile build(const Node& root) const {
    if (!root.IsMap())
      fail(root, "", "expected a model profile (name, layers), got " + describe(root));
    const MapView m(*this, root, "", {"name", "layers"});
    ModelProfile p;
    p.name = string(m.require("name"), "name");
    if (p.name.empty()) fail(m.require("name"), "name", "must not be empty");
    const Node layers = m.require("layers");
    if (!layers.IsSequence() || layers.size() == 0) {
      fail(layers, "layers", "expected a non-empty list of layers, got " + describe(layers));
    }
    std::set<std::string> names;
    // The devices the first timed layer gives, and whether the first layer gave FLOPs: every
    // other layer must agree, so the timeline never mixes units.
    std::optional<std::set<std::string>> devices;
    std::optional<bool> flops;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Node l = layers[i];
      const std::string path = "layers[" + std::to_string(i) + "]";
      const MapView lm(*this, l, path, {"name", "parameters", "forward_gflops", "times"});
      LayerProfile layer{.name = string(lm.require("name"), lm.child("name")),
                         .first_tensor = p.tensors.size(),
                         .tensor_count = 1};
      if (!names.insert(layer.name).second) {
        fail(lm.require("name"), lm.child("name"), "duplicate layer '" + layer.name + "'");
      }
      const Node params = lm.require("parameters");
      const std::int64_t count = integer(params, lm.child("parameters"), 1);
      const auto f = lm.get("forward_gflops");
      if (f) {
        layer.forward_gflops = number(*f, lm.child("forward_gflops"));
        if (layer.forward_gflops < 0) {
          fail(*f, lm.child("forward_gflops"), "must not be negative, got " + f->Scalar());
        }
      }
      const auto t = lm.get("times");
      if (!f && !t) {
        fail(l, path,
             "layer '" + layer.name +
                 "' gives neither forward_gflops nor times (its cost per sample)");
      }
      if (flops && *flops != f.has_value()) {
        fail(f ? lm.key_node("forward_gflops") : l, path,
             "forward_gflops is given on " + std::string(*flops ? "every" : "no") +
                 " layer before this one: give it on every layer or on none");
      }
      flops = f.has_value();
      if (t)
        read_times(*t, lm.child("times"), layer, devices);
      else if (devices)
        fail(l, path, "layer '" + layer.name + "' has no times; the layers before it have");
      p.tensors.push_back({layer.name, static_cast<std::size_t>(count)});
      p.forward_gflops += layer.forward_gflops;
      p.layers.push_back(std::move(layer));
    }
    return p;
  }

 private:
  void read_times(const Node& n, const std::string& path, LayerProfile& layer,
                  std::optional<std::set<std::string>>& devices) const {
    if (!n.IsMap() || n.size() == 0) {
      fail(n, path,
           "expected a map of devices to {forward: TIME, backward: TIME}, got " + describe(n));
    }
    std::set<std::string> here;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string device = scalar(it->first, path, "a device name");
      const std::string dpath = path + "." + device;
      const MapView dm(*this, it->second, dpath, {"forward", "backward"});
      LayerProfile::Times times{.forward = duration(dm.require("forward"), dm.child("forward")),
                                .backward = duration(dm.require("backward"), dm.child("backward"))};
      layer.times[device] = times;
      here.insert(device);
    }
    if (!devices) {
      devices = here;
    } else if (*devices != here) {
      std::vector<std::string> names(devices->begin(), devices->end());
      fail(n, path,
           "layer '" + layer.name + "' gives times for other devices than the layers before it (" +
               yaml::join(names) + ")");
    }
  }
};

}  // namespace

ModelProfile parse_profile(const std::string& yaml_text, const std::string& file) {
  try {
    return ProfileReader(file).build(yaml::load(yaml_text, file));
  } catch (const yaml::Error& e) {
    throw ScenarioError(e.file(), e.line(), e.column(), e.message());
  }
}

ModelProfile load_profile(const std::string& path) {
  std::string text;
  try {
    text = yaml::read_file(path);
  } catch (const yaml::Error& e) {
    throw ScenarioError(e.file(), e.line(), e.column(), e.message());
  }
  return parse_profile(text, path);
}

}  // namespace kf
