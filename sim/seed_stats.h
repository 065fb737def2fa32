// Statistics over the seeds of one arm of an experiment (`seeds: N`): each figure's mean, sample
// standard deviation and 95% confidence interval for the mean (Student's t), and how many seeds
// agree with a claim the experiment makes (which arm reached its target first, which was most
// efficient). Pure arithmetic on what the runs measured; sim/experiment.h decides what to feed it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kf {

// One figure over n seeds. With n == 1 there is no spread: sd and the interval are absent.
struct SeedStats {
  std::size_t n = 0;
  double mean = 0;
  std::optional<double> sd;        // sample standard deviation (divides by n - 1)
  std::optional<double> ci95_low;  // mean -/+ t(0.975, n - 1) * sd / sqrt(n)
  std::optional<double> ci95_high;
};

// The two-sided 95% quantile of Student's t with `dof` >= 1 degrees of freedom, t(0.975, dof),
// from Boost.Math (e.g. 12.706 for 1, 2.776 for 4). Throws std::invalid_argument for 0.
double t_quantile_95(std::size_t dof);

// The statistics of `values` (one per seed). Throws std::invalid_argument when empty.
SeedStats seed_stats(const std::vector<double>& values);

// {"n", "mean", "sd", "ci95_low", "ci95_high"}, the absent ones null.
nlohmann::json to_json(const SeedStats& s);

// How many of the seeds' own answers to a claim (e.g. which arm reached its target first: a name,
// or none) equal the experiment's answer `claim`.
std::size_t agreeing(const std::vector<std::optional<std::string>>& answers,
                     const std::optional<std::string>& claim);

}  // namespace kf
