// EventQueue: the flow world's Executor, a discrete-event queue on a simulated clock. Events run
// in time order, and events due at the same instant in the order they were posted, so a run is a
// pure function of its inputs. Single-threaded: post() and post_after() are called only from
// inside events (or before run()).
//
// Two kinds of event: a Task (a std::function in a slot, cancellable: what the runtime posts) and
// a Handler call (a pointer and a 64-bit argument held in the queue entry itself, not
// cancellable: what the world posts for every message it carries, once or twice per message,
// where a slot and a std::function cost two cold cache lines and an allocation's worth of work).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/executor.h"
#include "sim/flow/lane_queue.h"

namespace kf {

class EventQueue final : public Executor {
 public:
  TimePoint now() const override { return TimePoint(Duration(now_)); }
  void post(Task task) override { schedule_at(now_, std::move(task)); }
  TimerId post_after(Duration delay, Task task) override;
  void cancel(TimerId id) override;

  // `task` at simulated time `at_ns` (not before now).
  TimerId schedule_at(std::int64_t at_ns, Task task);

  // Receives the calls scheduled with schedule_call; must outlive them.
  class Handler {
   public:
    virtual void fire(std::uint64_t argument) = 0;

   protected:
    ~Handler() = default;
  };
  // handler.fire(argument) at `at_ns` (not before now), in the same order as tasks.
  void schedule_call(std::int64_t at_ns, Handler& handler, std::uint64_t argument) {
    queue_.push({std::max(at_ns, now_), &handler, argument, 0});
  }
  std::int64_t now_ns() const { return now_; }

  // Runs events until none is left or stop() is called (from inside an event).
  void run();
  void stop() { stopped_ = true; }
  std::uint64_t executed() const { return executed_; }
  // Events waiting, cancelled ones not counted.
  std::size_t pending() const { return queue_.size() - cancelled_; }
  // Entries held, cancelled ones not yet dropped included: what the queue costs in memory.
  std::size_t entries() const { return queue_.size(); }

 private:
  struct Entry {
    std::int64_t at;   // ties at one instant: first posted, first run (by seq)
    Handler* handler;  // null: a task, in slot `argument`
    std::uint64_t argument;
    std::uint64_t seq;  // push order: LaneQueue stamps it
  };
  // Tasks live in slots reused through a free list; a TimerId is (generation << 32 | slot), so a
  // stale id (its timer fired or was cancelled, the slot reused) cancels nothing.
  struct Slot {
    Task task;
    std::uint32_t generation = 0;
    bool live = false;
  };

  std::int64_t now_ = 0;
  std::uint64_t executed_ = 0;
  bool stopped_ = false;
  // A cancelled event's entry stays until it comes up, unless they outnumber the live ones: a
  // collective's timeout is cancelled at once but lies far ahead, and a long run would otherwise
  // carry thousands of dead entries.
  void compact();
  LaneQueue<Entry> queue_;
  std::size_t cancelled_ = 0;  // entries in queue_ whose slot is no longer live
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_;
};

}  // namespace kf
