#include "workloads/records.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

namespace kf {

namespace {

// trace.json draws the layers' backward spans of these ranks only.
constexpr int kLayerTraceRanks = 8;

double seconds(TimePoint t) {
  return to_seconds(t.time_since_epoch());
}
double micros(TimePoint t) {
  return static_cast<double>(t.time_since_epoch().count()) / 1e3;
}

std::ofstream open_for_write(const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path.string());
  return out;
}

void close_checked(std::ofstream& out, const std::filesystem::path& path) {
  out.close();
  if (!out) throw std::runtime_error("error writing " + path.string());
}

// CSV fields here never hold commas or quotes except free text; quote those.
std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// "accuracy=0.91;loss=0.3": the step's monitored values, in name order.
std::string values_text(const StepMetrics& m) {
  std::string out;
  for (const auto& [name, value] : m.values) {
    if (!out.empty()) out.push_back(';');
    out.append(fmt::format("{}={:.6g}", name, value));
  }
  return out;
}

}  // namespace

void RunRecorder::step_started(int rank, std::int64_t step, TimePoint at) {
  if (on_step_started) on_step_started(rank, step, at);
}

void RunRecorder::step_finished(const StepRecord& record) {
  const StepMetrics& m = record.metrics;
  StepPeers peers{.egress_total_bps = m.egress_total_bps(),
                  .ingress_total_bps = m.ingress_total_bps()};
  for (const auto& [peer, seconds] : m.latency_seconds)
    peers.max_latency_seconds = std::max(peers.max_latency_seconds, seconds);
  // Every peer named by any of the three, in rank order; those with nothing this step left out.
  std::vector<int> named;
  for (const auto* values : {&m.egress_bps, &m.ingress_bps, &m.latency_seconds}) {
    for (const auto& entry : *values)
      named.push_back(entry.peer);
  }
  std::sort(named.begin(), named.end());
  named.erase(std::unique(named.begin(), named.end()), named.end());
  for (const int p : named) {
    const double egress = m.egress_bps.get(p), ingress = m.ingress_bps.get(p);
    const double latency = m.latency_seconds.get(p, -1.0);
    if (egress == 0 && ingress == 0 && latency < 0) continue;
    peers.peers.push_back({p, egress, ingress, latency});
  }
  step_peers_.push_back(std::move(peers));
  StepRecord& kept = steps_.emplace_back(record);
  // Freed, not just cleared (`clear()` would keep the capacity).
  kept.metrics.egress_bps = {};
  kept.metrics.ingress_bps = {};
  kept.metrics.latency_seconds = {};
  if (on_step_finished) on_step_finished(record);
}

void RunRecorder::collective_finished(const CollectiveRecord& record) {
  collectives_.push_back(record);
}

void RunRecorder::worker_finished(int rank, const Status& status, TimePoint at) {
  finished_.emplace_back(rank, at);
  if (!status.ok()) errors_.push_back(fmt::format("worker {}: {}", rank, status.to_string()));
  if (on_worker_finished) on_worker_finished(rank, status, at);
}

void RunRecorder::adapted(int rank, std::int64_t step, const std::string& kind,
                          const std::string& detail, TimePoint at) {
  // Cluster-wide changes happen on every worker at once: rank 0 speaks for them. Joins, departures
  // and warnings are each worker's own.
  const bool own = kind == "joined" || kind == "detached" || kind == "warning";
  if (rank != 0 && !own) return;
  add_event({.time = at,
             .kind = kind,
             .phase = "at",
             .label = fmt::format("step {}", step),
             .detail = detail});
  if (!own) adaptations_.push_back({step, kind, detail});
}

void RunRecorder::add_event(EventRecord event) {
  events_.push_back(std::move(event));
}

std::vector<ClusterStep> RunRecorder::cluster_steps() const {
  std::map<std::int64_t, ClusterStep> by_step;
  for (const auto& s : steps_) {
    auto [it, fresh] = by_step.try_emplace(s.step);
    ClusterStep& c = it->second;
    if (fresh) {
      c = {.step = s.step, .begin = s.begin, .end = s.end, .strategy = s.strategy};
    }
    c.begin = std::min(c.begin, s.begin);
    c.end = std::max(c.end, s.end);
    c.samples += s.samples;
    ++c.workers;
  }
  std::vector<ClusterStep> out;
  for (auto& [step, c] : by_step)
    out.push_back(c);
  return out;
}

double throughput(const std::vector<ClusterStep>& steps) {
  double samples = 0;
  double time = 0;
  for (const auto& s : steps) {
    samples += static_cast<double>(s.samples);
    time += to_seconds(s.end - s.begin);
  }
  return time > 0 ? samples / time : 0.0;
}

nlohmann::json RunRecorder::summary(nlohmann::json run,
                                    const std::vector<EventWindow>& windows) const {
  const auto steps = cluster_steps();
  nlohmann::json j = std::move(run);
  j["completed_steps"] = steps.size();
  j["simulated_seconds"] = steps.empty() ? 0.0 : seconds(steps.back().end);
  j["throughput_samples_per_s"] = throughput(steps);
  std::vector<double> times;
  for (const auto& s : steps)
    times.push_back(to_seconds(s.end - s.begin));
  std::sort(times.begin(), times.end());
  j["step_time_s"] = {
      {"min", times.empty() ? 0.0 : times.front()},
      {"median", times.empty() ? 0.0 : times[times.size() / 2]},
      {"max", times.empty() ? 0.0 : times.back()},
  };
  nlohmann::json events = nlohmann::json::array();
  for (const auto& w : windows) {
    std::vector<ClusterStep> before, during, after;
    for (const auto& s : steps) {
      if (s.end <= w.start) {
        before.push_back(s);
      } else if (!w.stop || s.begin < *w.stop) {
        during.push_back(s);
      } else {
        after.push_back(s);
      }
    }
    const auto part = [](const std::vector<ClusterStep>& v) {
      return nlohmann::json{{"steps", v.size()}, {"samples_per_s", throughput(v)}};
    };
    nlohmann::json e = {
        {"label", w.label},       {"kind", w.kind},         {"start_s", seconds(w.start)},
        {"before", part(before)}, {"during", part(during)}, {"after", part(after)}};
    e["stop_s"] = w.stop ? nlohmann::json(seconds(*w.stop)) : nlohmann::json(nullptr);
    const double b = throughput(before);
    e["during_over_before"] =
        b > 0 ? nlohmann::json(throughput(during) / b) : nlohmann::json(nullptr);
    e["after_over_before"] =
        b > 0 && !after.empty() ? nlohmann::json(throughput(after) / b) : nlohmann::json(nullptr);
    // The first adaptation while the window is open: how many steps it took, and how much of the
    // throughput from before it won back for the rest of the window.
    if (!during.empty()) {
      const std::int64_t first = during.front().step;
      const auto adaptation = std::find_if(
          adaptations_.begin(), adaptations_.end(),
          [&](const Adaptation& a) { return a.step >= first && (a.step <= during.back().step); });
      if (adaptation != adaptations_.end()) {
        // From the step after the first one run adapted: that one is a transition (bytes of the
        // old paths still queued, new connections opening).
        std::vector<ClusterStep> recovered;
        for (const auto& st : during)
          if (st.step > adaptation->step) recovered.push_back(st);
        e["adaptation"] = {{"step", adaptation->step},
                           {"kind", adaptation->kind},
                           {"detail", adaptation->detail},
                           {"steps_from_start", adaptation->step - first},
                           {"recovered", part(recovered)},
                           {"recovered_over_before", b > 0 && !recovered.empty()
                                                         ? nlohmann::json(throughput(recovered) / b)
                                                         : nlohmann::json(nullptr)}};
      }
    }
    events.push_back(std::move(e));
  }
  j["events"] = std::move(events);
  nlohmann::json adaptations = nlohmann::json::array();
  for (const auto& a : adaptations_)
    adaptations.push_back({{"step", a.step}, {"kind", a.kind}, {"detail", a.detail}});
  j["adaptations"] = std::move(adaptations);
  j["errors"] = errors_;
  return j;
}

void RunRecorder::write(const std::string& dir, const nlohmann::json& summary) const {
  namespace fs = std::filesystem;
  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw std::runtime_error("cannot create " + root.string() + ": " + ec.message());

  {
    const auto path = root / "steps.csv";
    auto out = open_for_write(path);
    // exposed_comm_s only when some step overlapped its communication with its compute: without
    // overlap it is comm_s, and the records of runs without it stay as they were.
    const bool overlap = std::any_of(steps_.begin(), steps_.end(),
                                     [](const StepRecord& s) { return s.timeline != nullptr; });
    out << "rank,step,start_s,end_s,compute_s,comm_s,samples,samples_per_s,strategy,cluster_size,"
           "batch,lr,comm_bytes,comm_span_s,comm_Bps,egress_bps,ingress_bps,max_latency_s,"
           "policy_sums,actions,values"
        << (overlap ? ",exposed_comm_s\n" : "\n");
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      const StepRecord& s = steps_[i];
      const StepPeers& peers = step_peers_[i];
      const double total = to_seconds(s.end - s.begin);
      const StepMetrics& m = s.metrics;
      // Communication runs from the step's first collective (its compute's end without overlap)
      // to the step's end; the exposed part is what the compute did not hide.
      const TimePoint comm_from =
          s.comm_begin ? std::min(*s.comm_begin, s.compute_end) : s.compute_end;
      out << fmt::format(
          "{},{},{:.9f},{:.9f},{:.9f},{:.9f},{},{:.6f},{},{},{},{:g},{},{:.9f},{:.1f},{:.1f},{:.1f}"
          ","
          "{:.9f},{},{},{}",
          s.rank, s.step, seconds(s.begin), seconds(s.end), to_seconds(s.compute_end - s.begin),
          to_seconds(s.end - comm_from), s.samples,
          total > 0 ? static_cast<double>(s.samples) / total : 0.0, csv_text(s.strategy),
          s.cluster_size, m.batch_per_worker, m.learning_rate, m.collective_bytes,
          m.collective_span_seconds, m.collective_throughput, peers.egress_total_bps,
          peers.ingress_total_bps, peers.max_latency_seconds, s.policy_sums, csv_text(s.actions),
          values_text(m));
      if (overlap) out << fmt::format(",{:.9f}", to_seconds(s.end - s.compute_end));
      out << "\n";
    }
    close_checked(out, path);
  }
  {
    // Per peer pair and step, the pairs that carried traffic or were probed (a full matrix would
    // be n^2 rows per step for nothing on large clusters).
    const auto path = root / "peers.csv";
    auto out = open_for_write(path);
    out << "rank,step,peer,egress_bps,ingress_bps,latency_s\n";
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      for (const PeerSample& p : step_peers_[i].peers) {
        out << fmt::format("{},{},{},{:.1f},{:.1f},{:.9f}\n", steps_[i].rank, steps_[i].step,
                           p.peer, p.egress_bps, p.ingress_bps, p.latency_seconds);
      }
    }
    close_checked(out, path);
  }
  {
    const auto path = root / "collectives.csv";
    auto out = open_for_write(path);
    out << "rank,step,name,bytes,start_s,end_s,duration_s,strategy\n";
    for (const auto& c : collectives_) {
      out << fmt::format("{},{},{},{},{:.9f},{:.9f},{:.9f},{}\n", c.rank, c.step, csv_text(c.name),
                         c.bytes, seconds(c.begin), seconds(c.end), to_seconds(c.end - c.begin),
                         csv_text(c.strategy));
    }
    close_checked(out, path);
  }
  {
    const auto path = root / "events.csv";
    auto out = open_for_write(path);
    out << "time_s,kind,phase,label,detail\n";
    for (const auto& e : events_) {
      out << fmt::format("{:.9f},{},{},{},{}\n", seconds(e.time), e.kind, e.phase,
                         csv_text(e.label), csv_text(e.detail));
    }
    close_checked(out, path);
  }
  {
    const auto path = root / "summary.json";
    auto out = open_for_write(path);
    out << summary.dump(2) << "\n";
    close_checked(out, path);
  }
  {
    // Chrome trace: one thread per worker; steps, compute and collectives as spans, injected
    // events as global instants. Written one event at a time: a long run of a thousand workers
    // has hundreds of thousands, and a JSON tree of them all would take gigabytes.
    const auto path = root / "trace.json";
    auto out = open_for_write(path);
    out << R"({"displayTimeUnit":"ms","traceEvents":[)";
    bool first = true;
    const auto emit = [&out, &first](const nlohmann::json& event) {
      if (!first) out << ',';
      first = false;
      out << event.dump();
    };
    std::map<int, bool> named;
    for (const auto& s : steps_) {
      if (!named[s.rank]) {
        emit({{"name", "thread_name"},
              {"ph", "M"},
              {"pid", 0},
              {"tid", s.rank},
              {"args", {{"name", fmt::format("worker {}", s.rank)}}}});
        named[s.rank] = true;
      }
      emit({{"name", fmt::format("step {}", s.step)},
            {"cat", "step"},
            {"ph", "X"},
            {"pid", 0},
            {"tid", s.rank},
            {"ts", micros(s.begin)},
            {"dur", micros(s.end) - micros(s.begin)},
            {"args", {{"strategy", s.strategy}, {"samples", s.samples}}}});
      emit({{"name", "compute"},
            {"cat", "compute"},
            {"ph", "X"},
            {"pid", 0},
            {"tid", s.rank},
            {"ts", micros(s.begin)},
            {"dur", micros(s.compute_end) - micros(s.begin)}});
      // Each layer's backward inside the compute (overlapped steps), the nominal timeline
      // stretched to the compute's length. Ranks below kLayerTraceRanks only: a thousand workers'
      // layers would make the trace gigabytes.
      if (s.timeline && s.rank < kLayerTraceRanks && s.timeline->compute.count() > 0) {
        const double stretch = static_cast<double>((s.compute_end - s.begin).count()) /
                               static_cast<double>(s.timeline->compute.count());
        const auto at = [&](Duration d) {
          return micros(s.begin) + static_cast<double>(d.count()) * stretch / 1e3;
        };
        emit({{"name", "forward"},
              {"cat", "forward"},
              {"ph", "X"},
              {"pid", 0},
              {"tid", s.rank},
              {"ts", micros(s.begin)},
              {"dur", at(s.timeline->forward_end) - micros(s.begin)}});
        for (const LayerSpan& l : s.timeline->backward) {
          if (l.end == l.begin) continue;  // a layer of no cost (a norm)
          emit({{"name", l.name},
                {"cat", "backward"},
                {"ph", "X"},
                {"pid", 0},
                {"tid", s.rank},
                {"ts", at(l.begin)},
                {"dur", at(l.end) - at(l.begin)}});
        }
      }
    }
    for (const auto& c : collectives_) {
      emit({{"name", c.name},
            {"cat", "allreduce"},
            {"ph", "X"},
            {"pid", 1},
            {"tid", c.rank},
            {"ts", micros(c.begin)},
            {"dur", micros(c.end) - micros(c.begin)},
            {"args", {{"bytes", c.bytes}, {"step", c.step}}}});
    }
    for (const auto& e : events_) {
      emit({{"name", fmt::format("{} {}", e.kind, e.phase)},
            {"cat", "event"},
            {"ph", "i"},
            {"s", "g"},
            {"pid", 0},
            {"tid", 0},
            {"ts", micros(e.time)},
            {"args", {{"label", e.label}, {"detail", e.detail}}}});
    }
    out << "]}\n";
    close_checked(out, path);
  }
}

}  // namespace kf
