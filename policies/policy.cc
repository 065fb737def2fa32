#include "policies/policy.h"

#include <fmt/format.h>

#include <cstring>

namespace kf {

std::string describe(const Action& action) {
  return std::visit(Overloaded{
                        [](const SwitchStrategy& a) { return "switch " + a.label; },
                        [](const Resize& a) { return fmt::format("resize {}", a.workers); },
                        [](const SetBatchSize& a) { return fmt::format("batch {}", a.per_worker); },
                        [](const SetLearningRate& a) { return fmt::format("lr {}", a.value); },
                        [](const StopTraining& a) { return "stop (" + a.reason + ")"; },
                    },
                    action);
}

std::vector<std::byte> encode(const std::vector<Action>& actions) {
  // The description is canonical for every field except a forest and full-precision numbers,
  // which are appended.
  std::string text;
  for (const Action& a : actions) {
    text.append(describe(a));
    if (const auto* s = std::get_if<SwitchStrategy>(&a)) {
      text.append(s->name ? fmt::format(" name={}", strategy_name(*s->name)) : " forest=");
      for (int p : s->forest)
        text.append(fmt::format("{},", p));
    }
    if (const auto* l = std::get_if<SetLearningRate>(&a))
      text.append(fmt::format(" {:a}", l->value));
    text.push_back('\n');
  }
  // No action encodes to nothing: memcpy must not see the empty vector's null data().
  std::vector<std::byte> out(text.size());
  if (!text.empty()) std::memcpy(out.data(), text.data(), text.size());
  return out;
}

}  // namespace kf
