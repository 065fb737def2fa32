// workload.torch: a user's PyTorch task module (python/kungfu/torch/task.py) as a NumericModel,
// so that kfsim trains the user's own model with the numeric workload's optimizers, monitors,
// policies and resizes (workloads/numeric_program.h), its gradients real bytes on the simulated
// network.
//
// A plain C++ interface: the embedding (CPython through pybind11, torch_task.cc) stays behind it,
// so nothing else in kfsim includes a Python header, and a build without KF_WITH_TORCH links a
// stub (torch_task_stub.cc) whose every function throws TorchTaskError saying so.
//
// The interpreter starts on the first call, in the calling process, and lives until the process
// ends (it is never finalized: torch does not survive Py_Finalize). kfsim --jobs N forks its
// worker processes before any of them calls in, so each child starts its own interpreter; a
// process that has started one must not fork to simulate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "workloads/dataset.h"
#include "workloads/numeric_model.h"

namespace kf {

// A task that cannot be used (missing, raising, returning the wrong types or shapes), or kfsim
// built without torch. The message names the module and the function and, for an exception in
// the user's code, ends with that exception's last traceback line. kfsim exits 2 on it.
class TorchTaskError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TorchTaskSpec {
  std::string module;     // a .py file (absolute path) or an importable module name
  std::size_t train = 0;  // samples taken from the start of the training set; 0: all
  std::size_t test = 0;   // the same for the test set
  std::uint64_t seed = 1;
};

struct TorchWorkload {
  // tensors(): the model's trainable named parameters, in order; initial_parameters(spec.seed):
  // task.model() after torch.manual_seed(spec.seed), flattened. A model with buffers (BatchNorm's
  // running statistics) gives each worker a replica() of its own.
  std::shared_ptr<const NumericModel> model;
  // Each sample's input flattened into a row (features: the product of its non-batch dims; the
  // model sees it in its own shape again); classes: the largest label + 1.
  std::shared_ptr<const Dataset> train;
  std::shared_ptr<const Dataset> test;
};

// The task's model (built anew: every call reseeds torch) and its data (read once per process
// for each (module, train, test), then shared). Throws TorchTaskError.
TorchWorkload load_torch_workload(const TorchTaskSpec& spec);

// The profile file the task's profile() names (absolute), or "" when it defines none.
std::string torch_task_profile(const TorchTaskSpec& spec);

// Everything a run would do first, on a small scale: loads the task and its data, builds the
// model, and runs a batch of two samples forward and backward and through evaluate(), so that a
// broken task is reported before any record is written. Throws TorchTaskError.
void check_torch_task(const TorchTaskSpec& spec);

// The same in a child process (fork), for a caller that will fork to simulate and so must not
// start an interpreter itself. Throws TorchTaskError with the child's message.
void check_torch_task_in_child(const TorchTaskSpec& spec);

}  // namespace kf
