#include "runtime/monitor.h"

#include <algorithm>

#include "runtime/engine.h"

namespace kf {

void Monitor::begin_step(std::int64_t step, TimePoint now, const Engine& engine) {
  step_ = step;
  begin_ = now;
  egress0_ = engine.egress_bytes();
  ingress0_ = engine.ingress_bytes();
  first_begin_.reset();
  last_end_.reset();
  step_by_strategy_.clear();
  step_bytes_ = 0;
  if (cluster_size_ != engine.size()) reset_latencies(engine.size());
}

void Monitor::collective_done(const std::string& strategy, std::size_t bytes, TimePoint begin,
                              TimePoint end) {
  step_bytes_ += bytes;
  first_begin_ = first_begin_ ? std::min(*first_begin_, begin) : begin;
  last_end_ = last_end_ ? std::max(*last_end_, end) : end;
  auto [it, fresh] = step_by_strategy_.try_emplace(strategy, 0, std::pair{begin, end});
  it->second.first += bytes;
  if (!fresh) {
    it->second.second.first = std::min(it->second.second.first, begin);
    it->second.second.second = std::max(it->second.second.second, end);
  }
}

void Monitor::set_latency(int peer, Duration round_trip) {
  if (peer >= 0 && peer < cluster_size_) latency_seconds_.set(peer, to_seconds(round_trip));
}

void Monitor::reset_latencies(int cluster_size) {
  cluster_size_ = cluster_size;
  latency_seconds_.clear();
}

StepMetrics Monitor::end_step(TimePoint compute_end, TimePoint now, const Engine& engine,
                              std::int64_t samples, int batch_per_worker, double learning_rate) {
  StepMetrics m;
  m.step = step_;
  m.rank = engine.rank();
  m.cluster_size = engine.size();
  m.strategy = engine.strategy()->strategy().name;
  m.batch_per_worker = batch_per_worker;
  m.learning_rate = learning_rate;
  m.samples = samples;
  m.step_seconds = to_seconds(now - begin_);
  m.compute_seconds = to_seconds(compute_end - begin_);
  m.samples_per_second = m.step_seconds > 0 ? samples / m.step_seconds : 0.0;
  m.period_seconds = previous_step_end_ ? to_seconds(now - *previous_step_end_) : m.step_seconds;
  previous_step_end_ = now;
  m.collective_bytes = step_bytes_;
  if (first_begin_) m.collective_span_seconds = to_seconds(*last_end_ - *first_begin_);
  m.collective_throughput =
      m.collective_span_seconds > 0 ? step_bytes_ / m.collective_span_seconds : 0.0;
  for (const auto& [name, entry] : step_by_strategy_) {
    auto& total = strategies_[name];
    total.bytes += entry.first;
    total.span_seconds += to_seconds(entry.second.second - entry.second.first);
  }
  m.strategies = strategies_;
  const auto rates = [&](const PeerValues<std::uint64_t>& now_bytes,
                         const PeerValues<std::uint64_t>& then) {
    PeerValues<double> out;
    for (const auto& [peer, bytes] : now_bytes) {
      const std::uint64_t sent = bytes - std::min(bytes, then.get(peer));
      out.set(peer, m.step_seconds > 0 ? 8.0 * static_cast<double>(sent) / m.step_seconds : 0.0);
    }
    return out;
  };
  m.egress_bps = rates(engine.egress_bytes(), egress0_);
  m.ingress_bps = rates(engine.ingress_bytes(), ingress0_);
  m.latency_seconds = latency_seconds_;
  m.values = values_;
  return m;
}

}  // namespace kf
