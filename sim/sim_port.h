// A worker slot's Transport in a simulated world (ns-3 or flow level): sends go to the world;
// arrivals go to the engine, or wait while no engine listens (a worker not started yet, or
// between a resize's old and new engine) and are handed over from the event loop once one does,
// in arrival order. C++17: included by the ns-3 glue.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "runtime/transport.h"

namespace kf {

// Cache-line aligned, with what an arrival reads (the engine's handler, whether messages are
// parked) in the first line beside the vtable, and what a send reads besides the vtable in the
// second: at a thousand workers every message finds its port cold, and each line it touches
// costs a trip to memory.
class alignas(64) SimPort final : public Transport {
 public:
  using Send = std::function<void(int source, int destination, Message&& message)>;
  using PostNow = std::function<void(std::function<void()> fn)>;  // run fn from the event loop

  SimPort(int rank, Send send, PostNow post_now)
      : send_(std::move(send)), rank_(rank), post_now_(std::move(post_now)) {}

  void set_handlers(Handlers handlers) override {
    on_message_ = std::move(handlers.on_message);
    on_peer_lost_ = std::move(handlers.on_peer_lost);
    if (on_message_ && parked()) post_now_([this] { deliver_parked(); });
  }
  void send(int destination, Message&& message) override {
    send_(rank_, destination, std::move(message));
  }

  // A message from `source` has arrived.
  void deliver(int source, Message&& message) {
    if (on_message_ && !parked()) {
      on_message_(source, std::move(message));
    } else {
      parked_.emplace_back(source, std::move(message));
    }
  }
  // Tells the engine that `peer` cannot be reached any more (nothing if no engine listens).
  void peer_lost(int peer, const Status& why) const {
    if (on_peer_lost_) on_peer_lost_(peer, why);
  }

 private:
  bool parked() const { return !parked_.empty(); }
  void deliver_parked() {
    // Rare (a worker between two engines) and short: taken from the front one by one, since
    // the handler may go away, or park more, in between.
    while (on_message_ && parked()) {
      auto [source, message] = std::move(parked_.front());
      parked_.erase(parked_.begin());
      on_message_(source, std::move(message));
    }
  }

  std::function<void(int source, Message&& message)> on_message_;
  std::vector<std::pair<int, Message>> parked_;  // waiting for an engine, in arrival order
  Send send_;
  int rank_;
  PostNow post_now_;
  std::function<void(int peer, Status why)> on_peer_lost_;
};

}  // namespace kf
