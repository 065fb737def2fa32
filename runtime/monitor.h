// Monitoring: what a worker measured during one training step, as one snapshot policies read and
// the records write (steps.csv). Collective bytes and the first-begin / last-end span per step and
// per strategy (KungFu's monitored allreduce: throughput = bytes / span), egress and ingress rates
// per peer from the engine's byte counters, and the last round-trip time to every peer. World
// time only: simulated or steady clock, whichever the executor keeps.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/peer_values.h"
#include "runtime/time.h"

namespace kf {

class Engine;

struct StrategyTotals {
  std::uint64_t bytes = 0;
  double span_seconds = 0;  // summed per-step spans of collectives under this strategy
  double throughput() const { return span_seconds > 0 ? bytes / span_seconds : 0.0; }
};

struct StepMetrics {
  std::int64_t step = 0;
  int rank = 0;
  int cluster_size = 0;
  std::string strategy;
  int batch_per_worker = 0;
  double learning_rate = 0;
  std::int64_t samples = 0;  // this worker's, this step
  double step_seconds = 0;
  double compute_seconds = 0;
  double samples_per_second = 0;  // this worker: samples / step time
  // The whole cycle since this worker's previous step ended (that step's policy round and the
  // bookkeeping between steps included, which step_seconds leaves out): what a rate over
  // wall-clock time divides by. The first step of a Monitor: step_seconds.
  double period_seconds = 0;

  std::uint64_t collective_bytes = 0;                // every collective this step
  double collective_span_seconds = 0;                // first begin to last end
  double collective_throughput = 0;                  // bytes / span (B/s)
  std::map<std::string, StrategyTotals> strategies;  // since the start of training

  // Per peer rank, for the peers this worker has exchanged payload bytes with (since its engine
  // was made; 0 for those it did not this step): bits/s over this step.
  PeerValues<double> egress_bps;
  PeerValues<double> ingress_bps;
  PeerValues<double> latency_seconds;    // last round trip, per peer measured so far
  std::map<std::string, double> values;  // other monitors (gradient noise scale, variance, ...)

  double egress_total_bps() const { return egress_bps.sum(); }
  double ingress_total_bps() const { return ingress_bps.sum(); }
};

class Monitor {
 public:
  // The start of a step: remembers the engine's byte counters (they are per engine, so after a
  // resize the new engine's counters are simply read afresh).
  void begin_step(std::int64_t step, TimePoint now, const Engine& engine);
  void collective_done(const std::string& strategy, std::size_t bytes, TimePoint begin,
                       TimePoint end);
  void set_latency(int peer, Duration round_trip);
  void reset_latencies(int cluster_size);
  void set_value(const std::string& name, double value) { values_[name] = value; }

  // The snapshot of the step begun last; `compute_end` splits compute from communication.
  StepMetrics end_step(TimePoint compute_end, TimePoint now, const Engine& engine,
                       std::int64_t samples, int batch_per_worker, double learning_rate);

  const std::map<std::string, StrategyTotals>& strategies() const { return strategies_; }

 private:
  std::int64_t step_ = 0;
  TimePoint begin_;
  PeerValues<std::uint64_t> egress0_, ingress0_;
  std::optional<TimePoint> first_begin_, last_end_;
  std::optional<TimePoint> previous_step_end_;
  std::map<std::string, std::pair<std::uint64_t, std::pair<TimePoint, TimePoint>>>
      step_by_strategy_;
  std::uint64_t step_bytes_ = 0;
  std::map<std::string, StrategyTotals> strategies_;
  int cluster_size_ = 0;  // latencies are kept for ranks below it
  PeerValues<double> latency_seconds_;
  std::map<std::string, double> values_;
};

}  // namespace kf
