#include "workloads/optimizer.h"

#include <cmath>
#include <stdexcept>

namespace kf {

namespace {

// Heavy-ball momentum (PyTorch's form): v = m v + g; p -= lr v.
class Sgd final : public LocalOptimizer {
 public:
  Sgd(double momentum, std::size_t n) : momentum_(static_cast<float>(momentum)), velocity_(n, 0.0f) {}
  std::string name() const override { return "sgd"; }
  void step(std::span<float> p, std::span<const float> g, double lr) override {
    const auto rate = static_cast<float>(lr);
    for (std::size_t i = 0; i < p.size(); ++i) {
      velocity_[i] = momentum_ * velocity_[i] + g[i];
      p[i] -= rate * velocity_[i];
    }
  }
  std::span<float> state() override { return velocity_; }

 private:
  float momentum_;
  std::vector<float> velocity_;
};

// Adam with bias correction; the step count is kept in the state's last element.
class Adam final : public LocalOptimizer {
 public:
  Adam(const OptimizerOptions& o, std::size_t n)
      : beta1_(o.beta1), beta2_(o.beta2), epsilon_(o.epsilon), state_(2 * n + 1, 0.0f), n_(n) {}
  std::string name() const override { return "adam"; }
  void step(std::span<float> p, std::span<const float> g, double lr) override {
    float& t = state_[2 * n_];
    t += 1.0f;
    const double c1 = 1.0 - std::pow(beta1_, t), c2 = 1.0 - std::pow(beta2_, t);
    for (std::size_t i = 0; i < n_; ++i) {
      float& m = state_[i];
      float& v = state_[n_ + i];
      m = static_cast<float>(beta1_ * m + (1 - beta1_) * g[i]);
      v = static_cast<float>(beta2_ * v + (1 - beta2_) * g[i] * g[i]);
      p[i] -= static_cast<float>(lr * (m / c1) / (std::sqrt(v / c2) + epsilon_));
    }
  }
  std::span<float> state() override { return state_; }

 private:
  double beta1_, beta2_, epsilon_;
  std::vector<float> state_;
  std::size_t n_;
};

}  // namespace

std::unique_ptr<LocalOptimizer> make_local_optimizer(const OptimizerOptions& o,
                                                     std::size_t parameters) {
  if (o.name == "sgd") {
    if (o.momentum < 0 || o.momentum >= 1)
      throw std::invalid_argument("optimizer sgd: momentum must be in [0, 1)");
    return std::make_unique<Sgd>(o.momentum, parameters);
  }
  if (o.name == "adam") return std::make_unique<Adam>(o, parameters);
  throw std::invalid_argument("unknown local optimizer '" + o.name + "' (known: sgd, adam)");
}

}  // namespace kf
