#include "sim/event_injector.h"

#include <fmt/format.h>

#include <type_traits>
#include <utility>

namespace kf {

namespace {

std::string describe(const Trigger& t) {
  if (t.step) return fmt::format("step {}", *t.step);
  return fmt::format("{:.6f}s", to_seconds(*t.time));
}

}  // namespace

EventInjector::EventInjector(SimWorld& world, RunRecorder& recorder,
                             std::vector<EventWindow>& windows, InjectorHooks hooks)
    : world_(world), recorder_(recorder), windows_(windows), hooks_(std::move(hooks)) {}

void EventInjector::schedule(const std::vector<ScenarioEvent>& events) {
  for (const ScenarioEvent& e : events)
    std::visit([&](const auto& ev) { inject(e, ev); }, e.what);
}

void EventInjector::step_started(std::int64_t step) {
  while (started_step_ < step) {
    ++started_step_;
    const auto [first, last] = at_step_.equal_range(started_step_);
    for (auto it = first; it != last; ++it)
      it->second();
  }
}

void EventInjector::at(const Trigger& t, std::function<void()> fire) {
  if (t.step) {
    at_step_.emplace(*t.step, std::move(fire));
  } else {
    world_.executor().post_after(*t.time, std::move(fire));
  }
}

void EventInjector::record(const ScenarioEvent& e, const std::string& kind,
                           const std::string& phase, const std::string& detail) {
  const TimePoint now = world_.now();
  recorder_.add_event(
      {.time = now, .kind = kind, .phase = phase, .label = e.label, .detail = detail});
  if (phase == "start" || phase == "at") {
    window_of_[e.label] = windows_.size();
    windows_.push_back({.label = e.label, .kind = kind, .start = now});
  } else if (phase == "stop") {
    windows_[window_of_.at(e.label)].stop = now;
  }
}

void EventInjector::inject(const ScenarioEvent& e, const ContentionEvent& ev) {
  const std::string detail =
      fmt::format("{} -> {}, {} flow(s){}", ev.from, ev.to, ev.flows,
                  ev.rate_bps ? fmt::format(" at {:.0f} bps each", *ev.rate_bps) : "");
  at(ev.start, [this, e, ev, detail] {
    backgrounds_[e.label] = world_.start_background(ev.from, ev.to, ev.rate_bps, ev.flows);
    record(e, "contention", "start", detail);
  });
  if (ev.stop) {
    at(*ev.stop, [this, e] {
      world_.stop_background(backgrounds_.at(e.label));
      record(e, "contention", "stop", "");
    });
  }
}

void EventInjector::inject(const ScenarioEvent& e, const StragglerEvent& ev) {
  at(ev.start, [this, e, ev] {
    world_.set_straggler(ev.worker, ev.factor);
    record(e, "straggler", "start",
           fmt::format("worker {} computes {}x slower", ev.worker, ev.factor));
  });
  if (ev.stop) {
    at(*ev.stop, [this, e, ev] {
      world_.set_straggler(ev.worker, 1.0);
      record(e, "straggler", "stop", fmt::format("worker {}", ev.worker));
    });
  }
}

void EventInjector::inject(const ScenarioEvent& e, const LinkEvent& ev) {
  at(ev.at, [this, e, ev] {
    world_.set_link(ev.link, ev.bandwidth_bps, ev.latency);
    std::string detail = ev.link;
    if (ev.bandwidth_bps) detail += fmt::format(" bandwidth {:.0f} bps", *ev.bandwidth_bps);
    if (ev.latency) detail += fmt::format(" latency {:.9f} s", to_seconds(*ev.latency));
    record(e, "link", "at", detail);
  });
}

void EventInjector::inject(const ScenarioEvent& e, const FailEvent& ev) {
  at(ev.at, [this, e, ev] {
    if (!hooks_.abandon_worker(ev.worker)) return;
    world_.fail(ev.worker);
    record(e, "fail", "at", fmt::format("worker {} died at {}", ev.worker, describe(ev.at)));
    hooks_.worker_died();
  });
}

}  // namespace kf
