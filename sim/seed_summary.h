// The records of an experiment run at several seeds (`seeds: N` > 1): each arm's figures over its
// seeds as mean, standard deviation and 95% interval (sim/seed_stats.h), and the claims the
// experiment makes (which arm reached its target first, which was most efficient) with how many
// seeds agree. With one seed kfsim writes the single-run tables instead (sim/variants.h,
// sim/report.h), unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"

namespace kf {

// One arm (the whole scenario, a swept value or a variant) and its runs' summary.json, one per
// seed in seed order.
struct SeededArm {
  std::string name;                    // the swept value or the variant's name; "" for a plain run
  std::vector<std::string> overrides;  // a variant's
  std::vector<std::uint64_t> seeds;
  std::vector<nlohmann::json> summaries;
};

// The figures summarized per arm, in the order the tables list them.
const std::vector<std::string>& seed_figures();

// OUT/summary.json of a plain scenario at several seeds: {"scenario", "seeds", "errors",
// "figures": {FIGURE: {n, mean, sd, ci95_low, ci95_high}, ...}}.
nlohmann::json seeded_summary(const Scenario& scenario, const SeededArm& arm);

// The comparison of a sweep's values or of variants at several seeds: {"scenario", "seed",
// "seeds", KIND: [{name, overrides, seeds, workers, strategy, errors, reached_target, figures},
// ...], "first_to_target", "first_to_target_seeds_agree", "highest_efficiency",
// "highest_efficiency_seeds_agree", "seeds_first_to_target", "seeds_highest_efficiency"}.
// A claim is made from the means (first to target: the smallest mean time among the arms that
// reached their target at every seed, null if none did; highest efficiency: the largest mean
// efficiency), the first listed winning a tie; a seed agrees when its own runs make the same claim.
// KIND is "values" for a sweep, "variants" for variants.
nlohmann::json compare_seeded(const Scenario& scenario, const std::string& kind,
                              const std::vector<SeededArm>& arms);

// OUT/summary.json and OUT/variants.csv (one row per variant) from compare_seeded(.., "variants").
// Throws std::runtime_error when a file cannot be written.
void write_seeded_variants(const std::string& out, const nlohmann::json& comparison);

// OUT/summary.json and OUT/sweep.csv (one row per value) from compare_seeded(.., "values").
void write_seeded_sweep(const std::string& out, const Sweep& sweep,
                        const nlohmann::json& comparison);

// The comparison as a table for the terminal: each arm's mean throughput and efficiency with their
// intervals, and the claims.
std::string seeded_table(const nlohmann::json& comparison, const std::string& kind);

// Writes `text` to `path`; throws std::runtime_error when it cannot.
void write_text(const std::string& path, const std::string& text);

}  // namespace kf
