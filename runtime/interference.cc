#include "runtime/interference.h"

#include <numeric>
#include <string>

namespace kf {

InterferenceDetector::InterferenceDetector(InterferenceOptions options) : options_(options) {
  if (options_.window < 1) throw std::invalid_argument("interference: window must be >= 1");
  if (options_.warmup < 0) throw std::invalid_argument("interference: warmup must be >= 0");
  if (!(options_.threshold > 0 && options_.threshold < 1)) {
    throw std::invalid_argument("interference: threshold must be in (0, 1), got " +
                                std::to_string(options_.threshold));
  }
  if (options_.clear_threshold < options_.threshold || options_.clear_threshold > 1) {
    throw std::invalid_argument("interference: clear_threshold must be in [threshold, 1], got " +
                                std::to_string(options_.clear_threshold));
  }
}

std::optional<double> InterferenceDetector::current() const {
  if (recent_.size() < static_cast<std::size_t>(options_.window)) return std::nullopt;
  return std::accumulate(recent_.begin(), recent_.end(), 0.0) / static_cast<double>(recent_.size());
}

bool InterferenceDetector::observe(double throughput) {
  if (seen_++ < options_.warmup) return false;
  recent_.push_back(throughput);
  if (recent_.size() > static_cast<std::size_t>(options_.window)) recent_.pop_front();
  const auto mean = current();
  if (!mean) return false;
  if (!reference_) {
    reference_ = *mean;
    return false;
  }
  if (voting_) {
    voting_ = *mean < options_.clear_threshold * *reference_;
  } else {
    voting_ = *mean < options_.threshold * *reference_;
  }
  return voting_;
}

void InterferenceDetector::reset() {
  seen_ = 0;
  recent_.clear();
  reference_.reset();
  voting_ = false;
}

}  // namespace kf
