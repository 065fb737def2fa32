// The wall time of a numeric workload's learning: making its data set, and the model's forward
// and backward passes. It costs the same in every world, so a world's own cost is its wall time
// less this (perf.json's `learning_wall_seconds`): that is what a faster network model can speed
// up. Lives in the simulator, not the workload, because only the simulator may read the wall
// clock.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workloads/numeric_model.h"

namespace kf {

// Adds the wall time from its construction to its destruction to `total`.
class LearningClock {
 public:
  explicit LearningClock(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~LearningClock() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  LearningClock(const LearningClock&) = delete;
  LearningClock& operator=(const LearningClock&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

// A NumericModel whose passes add their wall time to a counter.
class TimedNumericModel final : public NumericModel {
 public:
  TimedNumericModel(std::shared_ptr<const NumericModel> inner, std::shared_ptr<double> seconds)
      : inner_(std::move(inner)), seconds_(std::move(seconds)) {
    tensors_ = inner_->tensors();
  }

  std::string name() const override { return inner_->name(); }
  std::vector<float> initial_parameters(std::uint64_t seed) const override {
    return inner_->initial_parameters(seed);
  }
  double loss_and_gradient(std::span<const float> parameters, const Dataset& data,
                           std::span<const std::size_t> batch,
                           std::span<float> gradient) const override {
    const LearningClock clock(*seconds_);
    return inner_->loss_and_gradient(parameters, data, batch, gradient);
  }
  Evaluation evaluate(std::span<const float> parameters, const Dataset& data) const override {
    const LearningClock clock(*seconds_);
    return inner_->evaluate(parameters, data);
  }
  std::shared_ptr<const NumericModel> replica() const override {
    auto own = inner_->replica();
    if (!own) return nullptr;
    return std::make_shared<TimedNumericModel>(std::move(own), seconds_);
  }

 private:
  std::shared_ptr<const NumericModel> inner_;
  std::shared_ptr<double> seconds_;
};

}  // namespace kf
