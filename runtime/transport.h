// Transport: moves Messages between the peers of one cluster version, addressed by rank.
// Contract every world keeps:
//   - send() never blocks and may be called only from the sender's executor;
//   - messages from one source to one destination arrive in the order they were sent;
//   - handlers run on the receiver's executor;
//   - a peer that cannot be reached any more is reported once through on_peer_lost.
// Zero copy (optional, for transports that opt in): send() may keep a borrowed payload (bytes of
// the sender's buffers, Payload::borrowed) until it has written it or a peer has copied it, and
// then drops it on the sender's executor; reclaim() takes such bytes back at once. A handler that
// sets remote_payloads may be handed remote payloads (Payload::remote) to read on its executor.
// Receives posted (optional, for transports that read payloads in pieces): a transport may ask
// the landing handler, once a message's header has come, where its payload belongs, write it
// straight there while the lease stays open, and deliver it as a placed payload (Payload::placed).
// C++17: included by world glue.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <vector>

#include "runtime/message.h"
#include "runtime/status.h"

namespace kf {

class Transport {
 public:
  struct Handlers {
    // Takes the message by rvalue reference: a Message is some 190 bytes, and each layer that
    // hands it on by value would move it once more.
    std::function<void(int source, Message&& message)> on_message;
    std::function<void(int peer, Status why)> on_peer_lost;
    // on_message reads remote payloads itself (or materializes them) on this executor, so the
    // transport need not copy them in first.
    bool remote_payloads = false;
    // For a message from `source` whose header has come, with a payload of `payload_bytes` still
    // to read: where to write it (see Landing). The transport checks the lease before each write
    // into it, drops the message if it closes midway, and never writes there once it is closed.
    std::function<Landing(int source, const MessageHeader& header, std::size_t payload_bytes)>
        landing;
  };

  virtual ~Transport() = default;

  virtual void set_handlers(Handlers handlers) = 0;
  virtual void send(int destination, Message&& message) = 0;

  // Payloads at least this big may be sent borrowed; the default (max) means never.
  virtual std::size_t min_borrowed_bytes() const { return std::numeric_limits<std::size_t>::max(); }
  // After this returns nothing reads the bytes borrowed from `lender` (Payload::lender) any more,
  // and every such payload has been dropped: queued ones are copied, ones lent to a peer are
  // withdrawn (the peer's read of them fails). For an operation whose peers did not take them
  // in time, or an engine shutting down. Returns the peers whose lent payloads were withdrawn
  // unread (each once).
  virtual std::vector<int> reclaim(const void* lender) {
    (void)lender;
    return {};
  }
};

}  // namespace kf
