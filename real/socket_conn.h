// Internal to real/: the private parts of SocketTransport that its source files share. The
// transport is split by job: socket_transport.cc is the spine, and socket_transport_connect.cc,
// _receive.cc, _send.cc and _lend.cc hold connecting and the handshake, reading frames, writing,
// and lending. Include this header from those files only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "real/epoll_loop.h"
#include "real/fd.h"
#include "real/handshake.h"
#include "real/socket_transport.h"
#include "real/wire.h"

namespace kf {
namespace socket_detail {

// Connecting during start-up: a failed attempt is retried after a wait that doubles from the
// first to the cap, until the connect deadline.
inline constexpr Duration kFirstBackoff = std::chrono::milliseconds(5);
inline constexpr Duration kMaxBackoff = std::chrono::seconds(1);

}  // namespace socket_detail

// One socket: where its handshake stands, its write queue, and the decoder of what it reads.
struct SocketTransport::Conn {
  enum class Phase { connecting, await_welcome, await_hello, await_proof, established };
  struct Out {
    std::vector<std::byte> prefix;
    Message message;
    std::size_t wire_size() const {
      return prefix.size() + (message.payload.is_phantom() ? 0 : message.payload.size());
    }
  };

  ConnId id = 0;
  Fd fd;
  EpollLoop::WatchId watch = 0;
  bool outbound = false;
  bool tcp = true;
  int peer = -1;  // known once the handshake names it (outbound: from the start)
  std::string address;
  Phase phase = Phase::connecting;
  std::vector<std::byte> hs;  // handshake bytes read so far
  std::size_t hs_need = 0;
  handshake::Hello hello;
  handshake::Nonce nonce{};
  Executor::TimerId hs_timer = 0;
  std::deque<Out> out;
  std::size_t out_offset = 0;  // bytes of out.front() already written
  std::uint32_t interest = 0;
  bool write_shut = false;
  bool lend = false;   // outbound: the acceptor copies large payloads out of our memory
  pid_t peer_pid = 0;  // inbound Unix socket: the connector's process, to copy from
  wire::FrameDecoder decoder;
};

}  // namespace kf
