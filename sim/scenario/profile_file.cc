// A profile file's schema:
//
//   name: my_model                 # required
//   layers:                        # required, forward order, at least one
//     - name: conv1                # required, unique
//       parameters: 1728           # >= 1: the layer's gradient elements (f32), one tensor named
//                                  # after the layer; or instead:
//       tensors:                   # its gradient tensors, forward order, at least one
//         - {name: conv1/kernel, parameters: 1728}   # name unique in the model; parameters >= 1
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
    // Every tensor's name, across layers: a tensor's allreduce is named after it.
    std::set<std::string> tensor_names;
    // The devices the first timed layer gives, and whether the first layer gave FLOPs: every
    // other layer must agree, so the timeline never mixes units.
    std::optional<std::set<std::string>> devices;
    std::optional<bool> flops;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const Node l = layers[i];
      const std::string path = "layers[" + std::to_string(i) + "]";
      const MapView lm(*this, l, path,
                       {"name", "parameters", "tensors", "forward_gflops", "times"});
      LayerProfile layer{.name = string(lm.require("name"), lm.child("name")),
                         .first_tensor = p.tensors.size(),
                         .tensor_count = 0};
      if (!names.insert(layer.name).second) {
        fail(lm.require("name"), lm.child("name"), "duplicate layer '" + layer.name + "'");
      }
      if (const auto ts = lm.get("tensors")) {
        if (lm.get("parameters")) {
          fail(lm.key_node("parameters"), lm.child("parameters"),
               "give either parameters or tensors, not both");
        }
        read_tensors(*ts, lm.child("tensors"), p, tensor_names);
      } else {
        const Node params = lm.require("parameters");
        add_tensor(p, tensor_names, layer.name, integer(params, lm.child("parameters"), 1),
                   lm.require("name"), lm.child("name"));
      }
      layer.tensor_count = p.tensors.size() - layer.first_tensor;
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
      p.forward_gflops += layer.forward_gflops;
      p.layers.push_back(std::move(layer));
    }
    return p;
  }

 private:
  // Appends the tensor `name` of `count` elements; `where`/`path` locate its name for an error.
  void add_tensor(ModelProfile& p, std::set<std::string>& tensor_names, const std::string& name,
                  std::int64_t count, const Node& where, const std::string& path) const {
    if (!tensor_names.insert(name).second) fail(where, path, "duplicate tensor '" + name + "'");
    p.tensors.push_back({name, static_cast<std::size_t>(count)});
  }

  void read_tensors(const Node& n, const std::string& path, ModelProfile& p,
                    std::set<std::string>& tensor_names) const {
    if (!n.IsSequence() || n.size() == 0) {
      fail(n, path, "expected a non-empty list of {name: NAME, parameters: N}, got " + describe(n));
    }
    for (std::size_t i = 0; i < n.size(); ++i) {
      const std::string tpath = path + "[" + std::to_string(i) + "]";
      const MapView tm(*this, n[i], tpath, {"name", "parameters"});
      const std::string name = string(tm.require("name"), tm.child("name"));
      if (name.empty()) fail(tm.require("name"), tm.child("name"), "must not be empty");
      add_tensor(p, tensor_names, name,
                 integer(tm.require("parameters"), tm.child("parameters"), 1), tm.require("name"),
                 tm.child("name"));
    }
  }

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
