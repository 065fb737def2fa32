// The embedding behind torch_task.h: CPython started lazily in this process (pybind11), the
// package's kungfu.torch._sim doing the Python side. Every call holds the GIL; kfsim calls from
// its one simulation thread.
#include "sim/torch/torch_task.h"

#include <pybind11/embed.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>

namespace kf {

namespace py = pybind11;

namespace {

// build/<flavour>/python, where the built kungfu package lies: KF_PYTHON_DIR, else the first
// python/kungfu/_core*.so above this executable (build/<flavour>/apps/kfsim), as sim/plot.cc
// finds analysis/plot.py.
std::string package_dir() {
  namespace fs = std::filesystem;
  if (const char* dir = std::getenv("KF_PYTHON_DIR"); dir != nullptr && *dir != 0) return dir;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path p = exe.parent_path(); p.has_relative_path(); p = p.parent_path()) {
    const fs::path pkg = p / "python" / "kungfu";
    std::error_code missing;
    if (!fs::is_directory(pkg, missing)) continue;
    for (const auto& entry : fs::directory_iterator(pkg, missing)) {
      if (entry.path().filename().string().starts_with("_core")) return (p / "python").string();
    }
  }
  return "";
}

// A Python exception as TorchTaskError: a TaskError's own message (it names the module and the
// function), else `what` and the exception's last line.
[[noreturn]] void rethrow(py::error_already_set& e, const std::string& what) {
  std::string message;
  try {
    const py::object task_error = py::module_::import("kungfu.torch.task").attr("TaskError");
    if (e.matches(task_error)) {
      message = py::str(e.value()).cast<std::string>();
    } else {
      const py::object last = py::module_::import("kungfu.torch.task").attr("_last_line");
      message = what + ": " + last(e.value()).cast<std::string>();
    }
  } catch (const std::exception&) {
    message = what + ": " + e.what();
  }
  throw TorchTaskError(message);
}

// The kungfu package without its runtime. kfsim has the runtime linked in, and the package's
// extension modules carry a second copy of it (libkungfu_runtime.so), whose protobuf descriptors
// would register twice in the one libprotobuf and abort the process. So `kungfu` and
// `kungfu.torch` are made bare packages over the built directories (their __init__.py, which load
// the extension modules, do not run), the extension modules refuse to load, and anything else of
// the runtime's API says why it is missing. Task modules may import kungfu's pure-Python modules
// (kungfu.torch.data, kungfu.torch.task), as examples/fashion_cnn.py does.
constexpr const char* kPackageWithoutRuntime = R"PY(
def _kf_package_without_runtime(root):
    import importlib.abc, os, sys, types
    why = ("is not available inside kfsim: the simulator runs the task's model and data, and "
           "its own runtime does the collectives")
    def package(name, path):
        m = types.ModuleType(name)
        m.__path__ = [path]
        m.__file__ = os.path.join(path, "__init__.py")
        def missing(attr, name=name):
            raise AttributeError(f"{name}.{attr} {why}")
        m.__getattr__ = missing
        sys.modules[name] = m
        return m
    kungfu = package("kungfu", os.path.join(root, "kungfu"))
    kungfu.torch = package("kungfu.torch", os.path.join(root, "kungfu", "torch"))
    class NoRuntime(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name in ("kungfu._core", "kungfu.torch._c10d", "kungfu.torch.distributed"):
                raise ImportError(f"{name} {why}")
            return None
    sys.meta_path.insert(0, NoRuntime())
)PY";

// The interpreter and kungfu.torch._sim, started on first use and never finalized. The module
// object is leaked on purpose: a static py::object would be released at exit, after the
// simulation thread let go of the interpreter and with no GIL held.
py::module_& sim_module() {
  static py::module_* module = nullptr;
  if (module != nullptr) return *module;
  if (!Py_IsInitialized()) {
    // No signal handlers: Ctrl-C stays kfsim's.
    py::initialize_interpreter(/*init_signal_handlers=*/false);
  }
  const std::string dir = package_dir();
  if (dir.empty()) {
    throw TorchTaskError(
        "workload.torch: cannot find the built kungfu package (build/<flavour>/python) above "
        "this kfsim; set KF_PYTHON_DIR");
  }
  try {
    py::module_::import("sys").attr("path").attr("insert")(0, dir);
    py::exec(kPackageWithoutRuntime, py::globals());
    py::globals()["_kf_package_without_runtime"](dir);
    module = new py::module_(py::module_::import("kungfu.torch._sim"));
  } catch (py::error_already_set& e) {
    rethrow(e, "workload.torch: importing kungfu.torch._sim from " + dir + " failed");
  }
  return *module;
}

// A task's Python object and kfsim's copy of its data, per (module, train, test).
struct LoadedTask {
  py::object sim;  // kungfu.torch._sim.SimTask
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> test;
};

Dataset to_dataset(const py::object& sim, bool train, int classes) {
  const auto rows = sim.attr("rows")(train).cast<py::tuple>();
  const auto x = rows[0].cast<py::array_t<float, py::array::c_style | py::array::forcecast>>();
  const auto y =
      rows[1].cast<py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>>();
  Dataset d;
  d.features = static_cast<int>(x.shape(1));
  d.classes = classes;
  d.x.assign(x.data(), x.data() + x.size());
  d.y.assign(y.data(), y.data() + y.size());
  return d;
}

LoadedTask& loaded(const TorchTaskSpec& spec) {
  static auto* cache = new std::map<std::tuple<std::string, std::size_t, std::size_t>, LoadedTask>;
  const auto key = std::make_tuple(spec.module, spec.train, spec.test);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  py::module_& m = sim_module();
  LoadedTask t;
  try {
    t.sim = m.attr("SimTask")(spec.module, spec.train, spec.test);
    const int classes = t.sim.attr("classes").cast<int>();
    t.train = std::make_shared<const Dataset>(to_dataset(t.sim, true, classes));
    t.test = std::make_shared<const Dataset>(to_dataset(t.sim, false, classes));
    t.sim.attr("drop_data")();
  } catch (py::error_already_set& e) {
    rethrow(e, "task module " + spec.module);
  }
  return cache->emplace(key, std::move(t)).first->second;
}

// A view of C++ memory as a numpy array, no copy (`base` keeps numpy from taking ownership).
template <typename T>
py::array_t<T> view(const T* data, std::vector<py::ssize_t> shape) {
  static const py::none base;
  return py::array_t<T>(std::move(shape), data, base);
}

class TorchModel final : public NumericModel {
 public:
  TorchModel(std::string module, py::object replica, std::uint64_t seed)
      : module_(std::move(module)), replica_(std::move(replica)), seed_(seed) {
    for (const auto& t : replica_.attr("tensors")().cast<py::list>()) {
      const auto pair = t.cast<py::tuple>();
      tensors_.emplace_back(pair[0].cast<std::string>(), pair[1].cast<std::size_t>());
    }
    const auto p = replica_.attr("parameters")().cast<py::array_t<float>>();
    initial_.assign(p.data(), p.data() + p.size());
    has_buffers_ = replica_.attr("has_buffers").cast<bool>();
  }
  ~TorchModel() override {
    const py::gil_scoped_acquire gil;
    replica_ = py::object();
  }

  std::string name() const override { return "torch:" + module_; }

  std::vector<float> initial_parameters(std::uint64_t seed) const override {
    if (seed != seed_) {
      throw TorchTaskError("task module " + module_ + ": the model was built for seed " +
                           std::to_string(seed_) + ", not " + std::to_string(seed));
    }
    return initial_;
  }

  double loss_and_gradient(std::span<const float> parameters, const Dataset& data,
                           std::span<const std::size_t> batch,
                           std::span<float> gradient) const override {
    const auto f = static_cast<std::size_t>(data.features);
    rows_.resize(batch.size() * f);
    labels_.resize(batch.size());
    for (std::size_t i = 0; i < batch.size(); ++i) {
      std::memcpy(rows_.data() + i * f, data.x.data() + batch[i] * f, f * sizeof(float));
      labels_[i] = data.y[batch[i]];
    }
    const py::gil_scoped_acquire gil;
    try {
      const auto b = static_cast<py::ssize_t>(batch.size());
      return replica_
          .attr("step")(view(rows_.data(), {b, data.features}), view(labels_.data(), {b}),
                        view(parameters.data(), {static_cast<py::ssize_t>(parameters.size())}),
                        view(gradient.data(), {static_cast<py::ssize_t>(gradient.size())}))
          .cast<double>();
    } catch (py::error_already_set& e) {
      rethrow(e, "task module " + module_ + ": a training step");
    }
  }

  Evaluation evaluate(std::span<const float> parameters, const Dataset& data) const override {
    // The set's labels as int64, once (a run evaluates on one test set).
    if (eval_labels_of_ != &data || eval_labels_.size() != data.size()) {
      eval_labels_.assign(data.y.begin(), data.y.end());
      eval_labels_of_ = &data;
    }
    const py::gil_scoped_acquire gil;
    try {
      const auto n = static_cast<py::ssize_t>(data.size());
      const auto r =
          replica_
              .attr("evaluate")(
                  view(data.x.data(), {n, data.features}), view(eval_labels_.data(), {n}),
                  view(parameters.data(), {static_cast<py::ssize_t>(parameters.size())}))
              .cast<std::pair<double, double>>();
      return {.loss = r.first, .accuracy = r.second};
    } catch (py::error_already_set& e) {
      rethrow(e, "task module " + module_ + ": evaluate");
    }
  }

  // Models with buffers keep them per worker: each worker gets a copy of the model (same
  // parameters, its own buffers). Without buffers the one model serves every worker.
  std::shared_ptr<const NumericModel> replica() const override {
    if (!has_buffers_) return nullptr;
    const py::gil_scoped_acquire gil;
    try {
      return std::make_shared<TorchModel>(module_, replica_.attr("clone")(), seed_);
    } catch (py::error_already_set& e) {
      rethrow(e, "task module " + module_ + ": copying the model for a worker");
    }
  }

 private:
  std::string module_;
  py::object replica_;  // kungfu.torch._sim.Replica
  std::uint64_t seed_;
  std::vector<float> initial_;
  bool has_buffers_ = false;
  // Scratch: the batch's rows and labels, gathered for Python (kfsim runs one step at a time).
  mutable std::vector<float> rows_;
  mutable std::vector<std::int64_t> labels_;
  mutable std::vector<std::int64_t> eval_labels_;
  mutable const Dataset* eval_labels_of_ = nullptr;
};

}  // namespace

TorchWorkload load_torch_workload(const TorchTaskSpec& spec) {
  LoadedTask& t = loaded(spec);
  const py::gil_scoped_acquire gil;
  try {
    py::object replica = t.sim.attr("replica")(spec.seed);
    return {.model = std::make_shared<TorchModel>(spec.module, std::move(replica), spec.seed),
            .train = t.train,
            .test = t.test};
  } catch (py::error_already_set& e) {
    rethrow(e, "task module " + spec.module + ": model()");
  }
}

std::string torch_task_profile(const TorchTaskSpec& spec) {
  LoadedTask& t = loaded(spec);
  const py::gil_scoped_acquire gil;
  try {
    return t.sim.attr("profile")().cast<std::string>();
  } catch (py::error_already_set& e) {
    rethrow(e, "task module " + spec.module + ": profile()");
  }
}

void check_torch_task(const TorchTaskSpec& spec) {
  const TorchWorkload w = load_torch_workload(spec);
  const std::vector<float> params = w.model->initial_parameters(spec.seed);
  std::vector<float> grad(params.size());
  const std::vector<std::size_t> batch{0, w.train->size() > 1 ? 1u : 0u};
  w.model->loss_and_gradient(params, *w.train, batch, grad);
  Dataset two = *w.test;  // evaluate() on the first two test samples only
  const std::size_t n = std::min<std::size_t>(2, two.size());
  two.x.resize(n * static_cast<std::size_t>(two.features));
  two.y.resize(n);
  w.model->evaluate(params, two);
  if (const auto r = w.model->replica()) r->loss_and_gradient(params, *w.train, batch, grad);
  torch_task_profile(spec);
}

}  // namespace kf
