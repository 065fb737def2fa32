// Gradient monitors. The gradient noise scale (McCandlish et al., "An Empirical Model of
// Large-Batch Training"): from the squared norm of a worker's local gradient (batch B_small) and
// of the cluster's averaged gradient (batch B_big = n x B_small),
//   |G|^2 = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)   (unbiased true norm)
//   S     = (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)          (trace of the noise)
//   B_noise = EMA(S) / EMA(|G|^2)
// the batch size beyond which larger batches stop paying. The variance monitor reports
// sum_i (E[g_i^2] - E[g_i]^2) over the workers' gradients.
#pragma once

#include <optional>
#include <span>

namespace kf {

class GnsEstimator {
 public:
  explicit GnsEstimator(double ema = 0.9) : ema_(ema) {}
  // One observation; needs b_big > b_small (more than one worker).
  void observe(double small_norm2, double big_norm2, double b_small, double b_big);
  std::optional<double> noise_scale() const;  // once both averages are positive
  double true_norm2() const { return g2_; }
  double noise_trace() const { return s_; }

 private:
  double ema_;
  bool seen_ = false;
  double g2_ = 0;
  double s_ = 0;
};

double squared_norm(std::span<const float> v);

// sum over i of (mean of squares - square of mean), given the sums over workers of g and of g^2.
double gradient_variance(std::span<const float> sum, std::span<const float> sum_of_squares,
                         int workers);

}  // namespace kf
