// A worker slot's Transport in a simulated world (ns-3 or flow level): sends go to the world;
// arrivals go to the engine, or wait while no engine listens (a worker not started yet, or
// between a resize's old and new engine) and are handed over from the event loop once one does,
// in arrival order. C++17: included by the ns-3 glue.
#pragma once

#include <deque>
#include <functional>
#include <utility>

#include "runtime/transport.h"

namespace kf {

class SimPort final : public Transport {
 public:
  using Send = std::function<void(int source, int destination, Message&& message)>;
  using PostNow = std::function<void(std::function<void()> fn)>;  // run fn from the event loop

  SimPort(int rank, Send send, PostNow post_now)
      : rank_(rank), send_(std::move(send)), post_now_(std::move(post_now)) {}

  void set_handlers(Handlers handlers) override {
    handlers_ = std::move(handlers);
    if (handlers_.on_message && !parked_.empty()) post_now_([this] { deliver_parked(); });
  }
  void send(int destination, Message message) override {
    send_(rank_, destination, std::move(message));
  }

  // A message from `source` has arrived.
  void deliver(int source, Message&& message) {
    if (handlers_.on_message && parked_.empty()) {
      handlers_.on_message(source, std::move(message));
    } else {
      parked_.emplace_back(source, std::move(message));
    }
  }
  // Tells the engine that `peer` cannot be reached any more (nothing if no engine listens).
  void peer_lost(int peer, const Status& why) const {
    if (handlers_.on_peer_lost) handlers_.on_peer_lost(peer, why);
  }

 private:
  void deliver_parked() {
    while (handlers_.on_message && !parked_.empty()) {
      auto [source, message] = std::move(parked_.front());
      parked_.pop_front();
      handlers_.on_message(source, std::move(message));
    }
  }

  int rank_;
  Send send_;
  PostNow post_now_;
  Handlers handlers_;
  std::deque<std::pair<int, Message>> parked_;
};

}  // namespace kf
