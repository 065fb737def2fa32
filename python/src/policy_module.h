// kungfu._core's policy bindings (policy_module.cc): the C++ policy stack and agreement phases,
// TrainingState, StepMetrics, the actions, and Python policies as kf::Policy.
#pragma once

#include <pybind11/pybind11.h>

namespace kf::python {

void bind_policies(pybind11::module_& m);

}  // namespace kf::python
