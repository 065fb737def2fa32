#include "policies/registry.h"

#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>

#include "policies/adaptive_batch_size.h"
#include "policies/adaptive_strategy.h"
#include "policies/elastic_provisioning.h"
#include "policies/scheduled_resize.h"

namespace kf {

namespace {

// Reads a policy's parameters, each at most once, and complains about the rest.
class Params {
 public:
  explicit Params(const PolicySpec& spec) : spec_(spec) {}

  std::optional<std::string> text(const std::string& key) {
    known_.insert(key);
    for (const auto& [k, v] : spec_.params)
      if (k == key) return v;
    return std::nullopt;
  }
  template <typename T>
  void number(const std::string& key, T& out) {
    const auto v = text(key);
    if (!v) return;
    const auto r = std::from_chars(v->data(), v->data() + v->size(), out);
    if (v->empty() || r.ec != std::errc{} || r.ptr != v->data() + v->size())
      fail(key, fmt::format("'{}' is not a number", *v));
  }
  void flag(const std::string& key, bool& out) {
    const auto v = text(key);
    if (!v) return;
    if (*v == "true" || *v == "1" || *v == "yes") {
      out = true;
    } else if (*v == "false" || *v == "0" || *v == "no") {
      out = false;
    } else {
      fail(key, fmt::format("'{}' is not true or false", *v));
    }
  }
  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw std::invalid_argument(fmt::format("policy {}: parameter '{}': {}", spec_.name, key, why));
  }
  // After reading: any parameter nobody asked for is a typo.
  void finish() const {
    for (const auto& [k, v] : spec_.params) {
      if (!known_.contains(k)) {
        throw std::invalid_argument(fmt::format("policy {}: unknown parameter '{}' (accepted: {})",
                                                spec_.name, k, fmt::join(known_, ", ")));
      }
    }
  }

 private:
  const PolicySpec& spec_;
  std::set<std::string> known_;
};

template <typename Make>
std::unique_ptr<Policy> build(const PolicySpec& spec, Make make) {
  Params p(spec);
  try {
    auto policy = make(p);
    p.finish();
    return policy;
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    if (what.starts_with("policy ")) throw;
    throw std::invalid_argument(fmt::format("policy {}: {}", spec.name, what));
  }
}

const std::map<std::string, std::function<std::unique_ptr<Policy>(const PolicySpec&)>>& makers() {
  static const std::map<std::string, std::function<std::unique_ptr<Policy>(const PolicySpec&)>> m{
      {"adaptive_strategy",
       [](const PolicySpec& spec) {
         return build(spec, [](Params& p) {
           AdaptiveStrategyOptions o;
           p.number("threshold", o.detection.threshold);
           p.number("clear_threshold", o.detection.clear_threshold);
           p.number("window", o.detection.window);
           p.number("warmup", o.detection.warmup);
           p.flag("switch_back", o.switch_back);
           p.number("probe_every", o.probe_every);
           if (const auto alt = p.text("alternative")) {
             if (*alt == "star") {
               o.alternative = AdaptiveStrategyOptions::Alternative::rerooted_star;
             } else if (*alt == "mst") {
               o.alternative = AdaptiveStrategyOptions::Alternative::mst;
             } else if (const auto name = parse_strategy_name(*alt)) {
               o.alternative = AdaptiveStrategyOptions::Alternative::fallback;
               o.fallback = *name;
             } else {
               p.fail("alternative", fmt::format("'{}' is not star, mst or a strategy name", *alt));
             }
           }
           return std::make_unique<AdaptiveStrategy>(o);
         });
       }},
      {"adaptive_batch_size",
       [](const PolicySpec& spec) {
         return build(spec, [](Params& p) {
           AdaptiveBatchSizeOptions o;
           p.number("interval", o.interval);
           p.number("min_batch", o.min_batch);
           p.number("max_batch", o.max_batch);
           p.number("scale", o.scale);
           p.number("min_change", o.min_change);
           if (const auto rule = p.text("lr_rule")) o.lr_rule = *rule;
           return std::make_unique<AdaptiveBatchSize>(o);
         });
       }},
      {"scheduled_resize",
       [](const PolicySpec& spec) {
         return build(spec, [](Params& p) {
           const auto schedule = p.text("schedule");
           if (!schedule) p.fail("schedule", "missing (e.g. schedule: \"10:4,20:2\")");
           return std::make_unique<ScheduledResize>(ScheduledResize::parse(*schedule));
         });
       }},
      {"elastic_provisioning",
       [](const PolicySpec& spec) {
         return build(spec, [](Params& p) {
           ElasticProvisioningOptions o;
           p.number("interval", o.interval);
           p.number("grow_by", o.grow_by);
           p.number("threshold", o.threshold);
           p.number("settle", o.settle);
           p.number("max_workers", o.max_workers);
           return std::make_unique<ElasticProvisioning>(o);
         });
       }},
  };
  return m;
}

}  // namespace

std::unique_ptr<Policy> make_policy(const PolicySpec& spec) {
  const auto it = makers().find(spec.name);
  if (it == makers().end()) {
    throw std::invalid_argument(
        fmt::format("unknown policy '{}' (known: {})", spec.name, fmt::join(policy_names(), ", ")));
  }
  return it->second(spec);
}

std::vector<std::string> policy_names() {
  std::vector<std::string> out;
  for (const auto& [name, make] : makers())
    out.push_back(name);
  return out;
}

PolicySpec parse_policy_flag(std::string_view text) {
  PolicySpec spec;
  const auto colon = text.find(':');
  spec.name = std::string(text.substr(0, colon));
  if (spec.name.empty()) throw std::invalid_argument("policy: empty name in '" + std::string(text) + "'");
  if (colon == std::string_view::npos) return spec;
  std::string_view rest = text.substr(colon + 1);
  while (!rest.empty()) {
    const auto eq = rest.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw std::invalid_argument(
          fmt::format("policy {}: '{}' is not key=value", spec.name, rest.substr(0, rest.find(','))));
    }
    const std::string key(rest.substr(0, eq));
    rest = rest.substr(eq + 1);
    // The schedule's own commas belong to it: it runs to the end.
    const auto comma = key == "schedule" ? std::string_view::npos : rest.find(',');
    spec.params.emplace_back(key, std::string(rest.substr(0, comma)));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return spec;
}

}  // namespace kf
