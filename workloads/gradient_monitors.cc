#include "workloads/gradient_monitors.h"

#include <stdexcept>

namespace kf {

void GnsEstimator::observe(double small_norm2, double big_norm2, double b_small, double b_big) {
  if (!(b_big > b_small) || b_small <= 0) {
    throw std::invalid_argument("gradient noise scale: needs B_big > B_small > 0 (more than one worker)");
  }
  const double g2 = (b_big * big_norm2 - b_small * small_norm2) / (b_big - b_small);
  const double s = (small_norm2 - big_norm2) / (1.0 / b_small - 1.0 / b_big);
  if (!seen_) {
    g2_ = g2;
    s_ = s;
    seen_ = true;
    return;
  }
  g2_ = ema_ * g2_ + (1 - ema_) * g2;
  s_ = ema_ * s_ + (1 - ema_) * s;
}

std::optional<double> GnsEstimator::noise_scale() const {
  if (!seen_ || g2_ <= 0 || s_ <= 0) return std::nullopt;
  return s_ / g2_;
}

double squared_norm(std::span<const float> v) {
  double n = 0;
  for (float x : v)
    n += static_cast<double>(x) * x;
  return n;
}

double gradient_variance(std::span<const float> sum, std::span<const float> sum_of_squares,
                         int workers) {
  double total = 0;
  const double n = workers;
  for (std::size_t i = 0; i < sum.size(); ++i) {
    const double mean = sum[i] / n;
    total += sum_of_squares[i] / n - mean * mean;
  }
  return total;
}

}  // namespace kf
