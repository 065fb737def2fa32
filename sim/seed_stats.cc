#include "sim/seed_stats.h"

#include <boost/math/distributions/students_t.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kf {

double t_quantile_95(std::size_t dof) {
  if (dof == 0) throw std::invalid_argument("t_quantile_95: needs at least 1 degree of freedom");
  const boost::math::students_t dist(static_cast<double>(dof));
  return boost::math::quantile(boost::math::complement(dist, 0.025));
}

SeedStats seed_stats(const std::vector<double>& values) {
  if (values.empty()) throw std::invalid_argument("seed_stats: no values");
  SeedStats s;
  s.n = values.size();
  double sum = 0;
  for (const double v : values)
    sum += v;
  s.mean = sum / static_cast<double>(s.n);
  if (s.n < 2) return s;
  // Two passes (deviations from the mean) rather than sum of squares: no cancellation when the
  // seeds differ little, which is the usual case.
  double squares = 0;
  for (const double v : values)
    squares += (v - s.mean) * (v - s.mean);
  s.sd = std::sqrt(squares / static_cast<double>(s.n - 1));
  const double half = t_quantile_95(s.n - 1) * *s.sd / std::sqrt(static_cast<double>(s.n));
  s.ci95_low = s.mean - half;
  s.ci95_high = s.mean + half;
  return s;
}

nlohmann::json to_json(const SeedStats& s) {
  const auto opt = [](const std::optional<double>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return {{"n", s.n},
          {"mean", s.mean},
          {"sd", opt(s.sd)},
          {"ci95_low", opt(s.ci95_low)},
          {"ci95_high", opt(s.ci95_high)}};
}

std::size_t agreeing(const std::vector<std::optional<std::string>>& answers,
                     const std::optional<std::string>& claim) {
  return static_cast<std::size_t>(std::count(answers.begin(), answers.end(), claim));
}

}  // namespace kf
