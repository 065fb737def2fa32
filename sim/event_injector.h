// Injects a scenario's events into a running world. Each event's start and stop (or its single
// moment) fires at its step, when the first worker begins that step, or at its simulated time;
// it acts on the world and is recorded (events.csv, and the before / during / after windows of
// summary.json). A new kind of event is a struct in sim/scenario/scenario.h (ScenarioEvent), its
// keys in sim/scenario/scenario.cc, and what it does here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/sim_world.h"
#include "workloads/records.h"

namespace kf {

// What an event needs of the run beyond the world: its workers.
struct InjectorHooks {
  // Worker `slot` dies now: stop its trainer. False when no live worker runs there.
  std::function<bool(int slot)> abandon_worker;
  // After a worker died and its connections closed: the run may be over.
  std::function<void()> worker_died;
};

class EventInjector {
 public:
  EventInjector(SimWorld& world, RunRecorder& recorder, std::vector<EventWindow>& windows,
                InjectorHooks hooks);
  EventInjector(const EventInjector&) = delete;
  EventInjector& operator=(const EventInjector&) = delete;

  // Schedules every event: time-triggered ones on the world's executor, step-triggered ones for
  // step_started(). Call once, before the world runs.
  void schedule(const std::vector<ScenarioEvent>& events);
  // The first worker began `step`: fires what waits for this step and any step before it.
  void step_started(std::int64_t step);

 private:
  void at(const Trigger& trigger, std::function<void()> fire);
  void record(const ScenarioEvent& e, const std::string& kind, const std::string& phase,
              const std::string& detail);
  void inject(const ScenarioEvent& e, const ContentionEvent& ev);
  void inject(const ScenarioEvent& e, const StragglerEvent& ev);
  void inject(const ScenarioEvent& e, const LinkEvent& ev);
  void inject(const ScenarioEvent& e, const FailEvent& ev);

  SimWorld& world_;
  RunRecorder& recorder_;
  std::vector<EventWindow>& windows_;
  InjectorHooks hooks_;
  std::multimap<std::int64_t, std::function<void()>> at_step_;
  std::int64_t started_step_ = -1;
  std::map<std::string, std::size_t> window_of_;  // by event label
  std::map<std::string, int> backgrounds_;        // a running contention's id, by event label
};

}  // namespace kf
