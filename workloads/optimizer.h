// Local optimizers: what each worker does with a gradient once the distributed optimizer
// (S-SGD, SMA, pair averaging, AdaSGD: workloads/numeric_program.h) has decided which gradient
// and which parameters to use. Their state (momentum, Adam's moments) is plain floats, so a
// worker that joins after a resize can receive it by broadcast.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kf {

class LocalOptimizer {
 public:
  virtual ~LocalOptimizer() = default;
  virtual std::string name() const = 0;
  // parameters -= update(gradient), with learning rate `lr`.
  virtual void step(std::span<float> parameters, std::span<const float> gradient, double lr) = 0;
  // Everything the next step depends on besides the parameters.
  virtual std::span<float> state() = 0;
};

struct OptimizerOptions {
  std::string name = "sgd";  // sgd (with momentum) or adam
  double momentum = 0.9;     // sgd
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;  // adam
};

// Throws std::invalid_argument naming the known optimizers.
std::unique_ptr<LocalOptimizer> make_local_optimizer(const OptimizerOptions& options,
                                                     std::size_t parameters);

}  // namespace kf
