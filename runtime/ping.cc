#include "runtime/ping.h"

#include <fmt/format.h>

#include "runtime/engine.h"

namespace kf {

PingOp::PingOp(Engine& engine, std::uint64_t id, int peer, std::shared_ptr<Duration> rtt,
               DoneCallback done)
    : Operation(engine, fmt::format("kf.ping/{}", id), "ping", std::move(done)),
      peer_(peer),
      id_(id),
      rtt_(std::move(rtt)) {}

void PingOp::start() {
  Message ping;
  ping.header.kind = MessageKind::ping;
  ping.header.name = name();
  ping.header.tag = id_;
  sent_ = engine().executor().now();
  engine().send(peer_, std::move(ping));
}

bool PingOp::accepts(int source, const MessageHeader& h) const {
  return h.kind == MessageKind::pong && source == peer_ && h.tag == id_;
}

void PingOp::on_message(int /*source*/, Message&& /*message*/) {
  *rtt_ = engine().executor().now() - sent_;
  finish();
}

std::string PingOp::waiting_for() const {
  return fmt::format("the answer from {}", engine().describe_peer(peer_));
}

}  // namespace kf
