// Transport: moves Messages between the peers of one cluster version, addressed by rank.
// Contract every world keeps:
//   - send() never blocks and may be called only from the sender's executor;
//   - messages from one source to one destination arrive in the order they were sent;
//   - handlers run on the receiver's executor;
//   - a peer that cannot be reached any more is reported once through on_peer_lost.
// C++17: included by world glue.
#pragma once

#include <functional>

#include "runtime/message.h"
#include "runtime/status.h"

namespace kf {

class Transport {
 public:
  struct Handlers {
    std::function<void(int source, Message message)> on_message;
    std::function<void(int peer, Status why)> on_peer_lost;
  };

  virtual ~Transport() = default;

  virtual void set_handlers(Handlers handlers) = 0;
  virtual void send(int destination, Message message) = 0;
};

}  // namespace kf
