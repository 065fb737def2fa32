#include "policies/scheduled_resize.h"

#include <charconv>
#include <stdexcept>
#include <string>

namespace kf {

ScheduledResize::ScheduledResize(std::map<std::int64_t, int> schedule)
    : schedule_(std::move(schedule)) {
  for (const auto& [step, size] : schedule_) {
    if (step < 1) throw std::invalid_argument("scheduled_resize: steps start at 1 (step 0 is the initial cluster)");
    if (size < 1) throw std::invalid_argument("scheduled_resize: a cluster needs at least 1 worker");
  }
}

std::map<std::int64_t, int> ScheduledResize::parse(std::string_view text) {
  std::map<std::int64_t, int> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto colon = entry.find(':');
    std::int64_t step = 0;
    int size = 0;
    const auto whole = [](std::string_view s, auto& v) {
      const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      return !s.empty() && r.ec == std::errc{} && r.ptr == s.data() + s.size();
    };
    if (colon == std::string_view::npos || !whole(entry.substr(0, colon), step) ||
        !whole(entry.substr(colon + 1), size)) {
      throw std::invalid_argument("scheduled_resize: '" + std::string(entry) +
                                  "' is not step:size (e.g. 100:8,200:4)");
    }
    if (!out.emplace(step, size).second)
      throw std::invalid_argument("scheduled_resize: step " + std::to_string(step) + " twice");
  }
  if (out.empty()) throw std::invalid_argument("scheduled_resize: empty schedule");
  return out;
}

void ScheduledResize::after_step(const StepMetrics& /*local*/, std::span<const double> /*sums*/,
                                 const TrainingState& state, std::vector<Action>& actions) {
  // Applied before the next step, so the size listed for step s is asked for after step s - 1.
  const auto it = schedule_.find(state.step + 1);
  if (it != schedule_.end() && it->second != state.cluster_size)
    actions.emplace_back(std::in_place_type<Resize>, Resize{.workers = it->second});
}

}  // namespace kf
