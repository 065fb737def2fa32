// Internal to real/: the private parts of SocketTransport that its source files share. The
// transport is split by job: socket_transport.cc is the spine, and socket_transport_connect.cc,
// _receive.cc, _send.cc and _lend.cc hold connecting and the handshake, reading frames, writing,
// and lending. Include this header from those files only.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "real/epoll_loop.h"
#include "real/fd.h"
#include "real/handshake.h"
#include "real/shm_ring.h"
#include "real/socket_transport.h"
#include "real/sockets.h"
#include "real/tls_session.h"
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
  // TCP connections with a TLS context pass through `tls` (its handshake) before the KungFu
  // handshake: after connecting (outbound) or from the start (inbound).
  enum class Phase { connecting, tls, await_welcome, await_hello, await_proof, established };
  struct Out {
    std::vector<std::byte> prefix;
    Message message;
    std::size_t suffix = 0;  // zeros after the payload: a ring's frame padded (wire::kBitPadded)
    std::size_t wire_size() const {
      return prefix.size() + (message.payload.is_phantom() ? 0 : message.payload.size()) + suffix;
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
  bool lend = false;    // outbound: the acceptor copies large payloads out of our memory
  bool duplex = false;  // TCP: carries the acceptor's frames back to the connector as well
  pid_t peer_pid = 0;   // inbound Unix socket: the connector's process, to copy from
  wire::FrameDecoder decoder;
  // Outbound: where our frames go instead of the socket, once the acceptor has mapped it (it
  // names the ring in the welcome). Inbound: the connector's ring, our frames' source.
  std::shared_ptr<ShmRing> ring;     // shared with the RingSlices of a round being delivered
  bool ring_held = false;            // a round read in place is being delivered (drain_ring)
  Executor::TimerId ring_retry = 0;  // outbound: a full ring is tried again then
  bool writes_ring() const { return ring && outbound && phase == Phase::established; }
  std::unique_ptr<tls::Session> tls;  // set: every byte goes through it (declared after fd)

  // The connection's bytes, through TLS when it has it, with the socket calls' conventions: a
  // count, 0 at the end of the stream, -1 with errno (EAGAIN: not now).
  ssize_t read_some(void* data, std::size_t size) {
    return tls ? tls->read(data, size) : ::recv(fd.get(), data, size, 0);
  }
  ssize_t write_iov(iovec* iov, int count) {
    if (tls) return tls->writev(iov, count);
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(count);
    return ::sendmsg(fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  // Writes a whole handshake message. They are tiny and go first on a fresh connection, so the
  // kernel's buffer always takes them at once; anything less is treated as a broken connection.
  bool write_all(const std::vector<std::byte>& bytes) {
    iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
    return write_iov(&iov, 1) == static_cast<ssize_t>(bytes.size());
  }
  // A TLS failure proper (a refused certificate, a protocol error), not a cut connection.
  bool tls_failed(int err) const { return tls && err == EPROTO; }
  // Why the last read or write failed with `err`.
  std::string io_error(int err) const {
    return tls_failed(err) ? tls->error() : net::errno_text(err);
  }
};

}  // namespace kf
