// Statistics over seeds (sim/seed_stats.h) against values computed by hand: Student's t quantiles
// from published tables, means, sample deviations and 95% intervals, and the consensus of claims.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "sim/seed_stats.h"

namespace kf {
namespace {

TEST(SeedStats, TQuantilesMatchTheTable) {
  // t(0.975, dof), as printed in any table of Student's t (to the digits shown there).
  EXPECT_NEAR(t_quantile_95(1), 12.7062047, 1e-6);
  EXPECT_NEAR(t_quantile_95(2), 4.3026527, 1e-6);
  EXPECT_NEAR(t_quantile_95(4), 2.7764451, 1e-6);
  EXPECT_NEAR(t_quantile_95(9), 2.2621572, 1e-6);
  EXPECT_NEAR(t_quantile_95(30), 2.0422725, 1e-6);
  EXPECT_THROW(t_quantile_95(0), std::invalid_argument);
}

TEST(SeedStats, OneSeedHasNoSpread) {
  const SeedStats s = seed_stats({4.5});
  EXPECT_EQ(s.n, 1u);
  EXPECT_DOUBLE_EQ(s.mean, 4.5);
  EXPECT_FALSE(s.sd);
  EXPECT_FALSE(s.ci95_low);
  EXPECT_FALSE(s.ci95_high);
  const auto j = to_json(s);
  EXPECT_TRUE(j["sd"].is_null());
  EXPECT_TRUE(j["ci95_low"].is_null());
  EXPECT_THROW(seed_stats({}), std::invalid_argument);
}

TEST(SeedStats, TwoSeeds) {
  // mean 11, sd sqrt(2), half-width 12.7062047 * sqrt(2) / sqrt(2).
  const SeedStats s = seed_stats({10, 12});
  EXPECT_DOUBLE_EQ(s.mean, 11);
  EXPECT_NEAR(*s.sd, std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(*s.ci95_low, 11 - 12.7062047, 1e-6);
  EXPECT_NEAR(*s.ci95_high, 11 + 12.7062047, 1e-6);
}

TEST(SeedStats, FiveSeeds) {
  // 1..5: mean 3, sd sqrt(10 / 4) = 1.5811388, half-width 2.7764451 * 1.5811388 / sqrt(5)
  // = 1.9632432.
  const SeedStats s = seed_stats({5, 1, 4, 2, 3});
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(*s.sd, 1.5811388, 1e-6);
  EXPECT_NEAR(*s.ci95_low, 3 - 1.9632432, 1e-6);
  EXPECT_NEAR(*s.ci95_high, 3 + 1.9632432, 1e-6);
  const auto j = to_json(s);
  EXPECT_EQ(j["n"], 5);
  EXPECT_NEAR(j["ci95_high"].get<double>(), 4.9632432, 1e-6);
}

TEST(SeedStats, EqualSeedsHaveAZeroWideInterval) {
  const SeedStats s = seed_stats({7, 7, 7});
  EXPECT_DOUBLE_EQ(*s.sd, 0);
  EXPECT_DOUBLE_EQ(*s.ci95_low, 7);
  EXPECT_DOUBLE_EQ(*s.ci95_high, 7);
}

TEST(SeedStats, AgreeingCountsTheSeedsThatGaveTheClaim) {
  EXPECT_EQ(agreeing({"a", "b", "b", std::nullopt}, "b"), 2u);
  EXPECT_EQ(agreeing({"a", "b", "b", std::nullopt}, std::nullopt), 1u);
  EXPECT_EQ(agreeing({"a", "a"}, "c"), 0u);
  EXPECT_EQ(agreeing({}, "a"), 0u);
}

}  // namespace
}  // namespace kf
