// Numeric reference models: real forward and backward passes (Eigen), so optimizers, gradient
// monitors and the batch-size policy work on real gradients in every world. A model is a shape;
// its parameters are one flat float vector the caller owns (the trainer's buffer, which
// collectives move as it is), laid out tensor by tensor as tensors() lists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "workloads/dataset.h"

namespace kf {

struct Evaluation {
  double loss = 0;
  double accuracy = 0;
};

class NumericModel {
 public:
  virtual ~NumericModel() = default;
  virtual std::string name() const = 0;
  // (name, element count) of each tensor in the flat parameter vector, in order.
  const std::vector<std::pair<std::string, std::size_t>>& tensors() const { return tensors_; }
  std::size_t parameter_count() const;
  // Small random weights (He-scaled), zero biases, from `seed`: every worker that uses the same
  // seed starts from the same point.
  virtual std::vector<float> initial_parameters(std::uint64_t seed) const = 0;
  // Mean cross-entropy over `batch` (rows of `data`); writes its gradient into `gradient`.
  virtual double loss_and_gradient(std::span<const float> parameters, const Dataset& data,
                                   std::span<const std::size_t> batch,
                                   std::span<float> gradient) const = 0;
  virtual Evaluation evaluate(std::span<const float> parameters, const Dataset& data) const = 0;
  // A model of its own for one worker, for a model that keeps state beside its parameters (a
  // PyTorch model's BatchNorm running statistics, sim/torch/); nullptr (the default): it keeps
  // none, and one instance serves every worker.
  virtual std::shared_ptr<const NumericModel> replica() const { return nullptr; }

 protected:
  std::vector<std::pair<std::string, std::size_t>> tensors_;
};

// "softmax" (multinomial logistic regression) or "mlp" (one hidden ReLU layer of `hidden`).
// Throws std::invalid_argument naming the known models.
std::unique_ptr<NumericModel> make_numeric_model(const std::string& name, int features, int classes,
                                                 int hidden = 64);
std::vector<std::string> numeric_model_names();

}  // namespace kf
