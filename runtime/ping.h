// A latency probe: one tiny message to a peer, answered at once by its engine (not by an
// operation), so the round trip measures the network and the peer's event loop, nothing else.
// Monitoring pings every peer to fill the latency matrix policies read (e.g. for an MST).
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/operation.h"

namespace kf {

class PingOp final : public Operation {
 public:
  // `id` is unique among this engine's requests (Engine::next_request_id()); the measured round
  // trip is written to *rtt before the operation completes.
  PingOp(Engine& engine, std::uint64_t id, int peer, std::shared_ptr<Duration> rtt,
         DoneCallback done);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message&& message) override;
  std::string waiting_for() const override;

 private:
  int peer_;
  std::uint64_t id_;
  TimePoint sent_;
  std::shared_ptr<Duration> rtt_;
};

}  // namespace kf
