// Interference detection as KungFu does it (a reference throughput, a vote when throughput falls
// below threshold x reference, votes summed by allreduce, interference on a majority), made
// robust: the reference and the current value are means over a window of steps rather than one
// sample, the first steps (warm-up) are skipped, and a worker that voted "interfered" keeps
// voting so until throughput is back above a higher clear threshold (hysteresis), so one noisy
// step neither raises nor clears the alarm. This class is the local half; the vote is the
// policy's business.
#pragma once

#include <deque>
#include <optional>
#include <stdexcept>

namespace kf {

struct InterferenceOptions {
  double threshold = 0.8;        // vote when mean throughput < threshold x reference
  double clear_threshold = 0.9;  // stop voting when it is back above clear x reference
  int window = 3;                // steps averaged, for the reference and for the current value
  int warmup = 1;                // steps ignored after a (re)start before the reference
};

class InterferenceDetector {
 public:
  explicit InterferenceDetector(InterferenceOptions options = {});

  // One step's throughput (any unit, e.g. collective bytes/s). Returns this worker's vote.
  bool observe(double throughput);
  // Forget everything: the next samples (after warm-up) make a new reference. Called after a
  // strategy switch, whose throughput is not comparable with the old one.
  void reset();

  std::optional<double> reference() const { return reference_; }
  std::optional<double> current() const;  // mean of the last window, once full
  bool voting() const { return voting_; }
  const InterferenceOptions& options() const { return options_; }

 private:
  InterferenceOptions options_;
  int seen_ = 0;
  std::deque<double> recent_;
  std::optional<double> reference_;
  bool voting_ = false;
};

}  // namespace kf
