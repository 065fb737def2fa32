// RunRecorder: the output records every run writes, simulated or real, so analysis/ can plot
// both side by side: steps.csv, peers.csv, collectives.csv, events.csv, summary.json and a
// Chrome trace (trace.json, opens in Perfetto). Everything is in world time (simulated or steady
// clock), so a simulated run's files are byte-identical for the same scenario and seed.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workloads/trainer.h"

namespace kf {

struct EventRecord {
  TimePoint time;
  std::string kind;   // contention, straggler, link, fail, ...
  std::string phase;  // start, stop, at
  std::string label;  // "contention#1 (line 42)"
  std::string detail;
};

// An injected event's extent, for the before / during / after throughput in summary.json.
struct EventWindow {
  std::string label;
  std::string kind;
  TimePoint start;
  std::optional<TimePoint> stop;  // none: until the end
};

// All workers' view of one step: from the first begin to the last end.
struct ClusterStep {
  std::int64_t step = 0;
  TimePoint begin, end;
  std::int64_t samples = 0;
  int workers = 0;
  std::string strategy;
};

class RunRecorder final : public TrainingObserver {
 public:
  void step_started(int rank, std::int64_t step, TimePoint at) override;
  void step_finished(const StepRecord& record) override;
  void collective_finished(const CollectiveRecord& record) override;
  void worker_finished(int rank, const Status& status, TimePoint at) override;
  void adapted(int rank, std::int64_t step, const std::string& kind, const std::string& detail,
               TimePoint at) override;
  void add_event(EventRecord event);

  // Listeners for whoever drives the run (event triggers, progress, stopping the world).
  std::function<void(int rank, std::int64_t step, TimePoint at)> on_step_started;
  std::function<void(const StepRecord&)> on_step_finished;
  std::function<void(int rank, const Status&, TimePoint at)> on_worker_finished;

  // The steps as recorded, except that the per-peer values of their metrics (egress_bps,
  // ingress_bps, latency_seconds) are left empty: a star's root has n of each per step, gigabytes
  // over a long run of a thousand workers. peer_samples() has them.
  const std::vector<StepRecord>& steps() const { return steps_; }
  struct PeerSample {
    int peer;
    double egress_bps, ingress_bps, latency_seconds;  // latency < 0: not measured
  };
  // steps()[i]'s peers that carried traffic or were probed, and its totals over every peer.
  struct StepPeers {
    double egress_total_bps = 0, ingress_total_bps = 0, max_latency_seconds = -1;
    std::vector<PeerSample> peers;
  };
  const std::vector<StepPeers>& peer_samples() const { return step_peers_; }
  std::vector<ClusterStep> cluster_steps() const;
  const std::vector<CollectiveRecord>& collectives() const { return collectives_; }
  const std::vector<std::string>& errors() const { return errors_; }

  // The summary: `run` (scenario, seed, world, ... given by the caller) plus throughput overall
  // and before / during / after each window.
  nlohmann::json summary(nlohmann::json run, const std::vector<EventWindow>& windows) const;
  // Writes every record file into `dir` (created if needed). Throws std::runtime_error naming
  // the file on an I/O failure.
  void write(const std::string& dir, const nlohmann::json& summary) const;

 private:
  std::vector<StepRecord> steps_;
  std::vector<StepPeers> step_peers_;  // parallel to steps_
  std::vector<CollectiveRecord> collectives_;
  std::vector<EventRecord> events_;
  std::vector<std::string> errors_;
  std::vector<std::pair<int, TimePoint>> finished_;
  struct Adaptation {
    std::int64_t step;
    std::string kind;
    std::string detail;
  };
  std::vector<Adaptation> adaptations_;  // the cluster's, once each (as rank 0 saw them)
};

// Samples per second over a set of cluster steps (total samples / total step time).
double throughput(const std::vector<ClusterStep>& steps);

}  // namespace kf
