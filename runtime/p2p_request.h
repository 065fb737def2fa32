// A request for a peer's saved blob: one message out, one back. The reply is matched by request
// id, so many requests (to one or several peers) can be in flight at once.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/operation.h"
#include "runtime/p2p_store.h"

namespace kf {

using BlobCallback = std::function<void(Status, Blob)>;

class P2PRequest final : public Operation {
 public:
  // `id` is unique among this engine's requests (Engine::next_request_id()).
  P2PRequest(Engine& engine, std::uint64_t id, int peer, std::string blob_name,
             std::uint64_t version, std::shared_ptr<Blob> result, DoneCallback done);

  void start() override;
  bool accepts(int source, const MessageHeader& header) const override;
  void on_message(int source, Message&& message) override;
  std::string waiting_for() const override;

 private:
  int peer_;
  std::string blob_name_;
  std::uint64_t version_;
  std::uint64_t id_;
  std::shared_ptr<Blob> result_;
};

}  // namespace kf
