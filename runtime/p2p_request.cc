#include "runtime/p2p_request.h"

#include <fmt/format.h>

#include "runtime/engine.h"
#include "runtime/op_helpers.h"

namespace kf {

namespace {

std::string request_name(std::uint64_t id) {
  return fmt::format("kf.p2p/{}", id);
}

}  // namespace

P2PRequest::P2PRequest(Engine& engine, std::uint64_t id, int peer, std::string blob_name,
                       std::uint64_t version, std::shared_ptr<Blob> result, DoneCallback done)
    : Operation(engine, request_name(id), "request", std::move(done)),
      peer_(peer),
      blob_name_(std::move(blob_name)),
      version_(version),
      id_(id),
      result_(std::move(result)) {}

void P2PRequest::start() {
  Message request;
  request.header.kind = MessageKind::p2p_request;
  request.header.name = blob_name_;
  request.header.tag = id_;
  request.header.version = version_;
  engine().send(peer_, std::move(request));
}

bool P2PRequest::accepts(int source, const MessageHeader& h) const {
  return h.kind == MessageKind::p2p_response && source == peer_ && h.tag == id_;
}

void P2PRequest::on_message(int /*source*/, Message&& message) {
  if (message.header.flags & kFlagNotFound) {
    finish(Status(ErrorCode::not_found,
                  fmt::format("request '{}' v{} from {}: the peer has no such blob", blob_name_,
                              version_, engine().describe_peer(peer_))));
    return;
  }
  if (message.payload.is_phantom()) {
    finish(Status(ErrorCode::protocol, fmt::format("request '{}' from {}: phantom reply",
                                                   blob_name_, engine().describe_peer(peer_))));
    return;
  }
  if (!message.payload.materialize()) {
    const PayloadError e = payload_failure(message.payload);
    finish(Status(e.code, fmt::format("request '{}' from {}: {}", blob_name_,
                                      engine().describe_peer(peer_), e.why)));
    return;
  }
  result_->version = message.header.version;
  const Payload& p = message.payload;
  result_->bytes = std::make_shared<const std::vector<std::byte>>(p.data(), p.data() + p.size());
  finish();
}

std::string P2PRequest::waiting_for() const {
  return fmt::format("the reply for blob '{}' from {}", blob_name_, engine().describe_peer(peer_));
}

}  // namespace kf
