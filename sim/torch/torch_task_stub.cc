// torch_task.h without KF_WITH_TORCH: kfsim reports that it cannot run a torch workload.
#include "sim/torch/torch_task.h"

namespace kf {

namespace {

[[noreturn]] void unavailable(const TorchTaskSpec& spec) {
  throw TorchTaskError("workload.torch (task module " + spec.module +
                       "): this kfsim was built without KF_WITH_TORCH (PyTorch, pybind11 and "
                       "Python's headers; apt-get install python3-torch pybind11-dev "
                       "python3-dev, then reconfigure)");
}

}  // namespace

TorchWorkload load_torch_workload(const TorchTaskSpec& spec) {
  unavailable(spec);
}
std::string torch_task_profile(const TorchTaskSpec& spec) {
  unavailable(spec);
}
void check_torch_task(const TorchTaskSpec& spec) {
  unavailable(spec);
}

}  // namespace kf
