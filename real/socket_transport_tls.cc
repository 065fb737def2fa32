// SocketTransport's TLS layer. With a TLS context, a TCP connection does the TLS handshake (TLS
// 1.3, each side's certificate verified against the CA) before the KungFu handshake, stepped on
// the connection's readiness events; the KungFu handshake and every frame then go through the
// connection's tls::Session. As the connector: a handshake cut short is retried within the
// connect deadline, like a refused connect (the peer may be starting, or replacing its listener
// for a new cluster version); a handshake TLS refuses (the peer's certificate, or ours) is final
// and the peer is lost with the reason. As the acceptor: whoever fails TLS is refused and logged,
// like any failed handshake, and never delivers a message.
#include "real/socket_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "real/socket_conn.h"
#include "real/tls_session.h"

namespace kf {
namespace {

// "TCP peer 10.0.0.2:53122": who connected, for the log of a refusal.
std::string remote_of(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  char ip[INET_ADDRSTRLEN] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip) == nullptr) {
    return "a TCP peer";
  }
  return fmt::format("TCP peer {}:{}", ip, ntohs(addr.sin_port));
}

}  // namespace

void SocketTransport::start_tls(Conn& c) {
  if (!c.outbound) c.address = remote_of(c.fd.get());
  try {
    c.tls = std::make_unique<tls::Session>(
        *options_.tls, c.fd.get(),
        c.outbound ? tls::Session::Role::connect : tls::Session::Role::accept);
  } catch (const std::runtime_error& e) {
    if (c.outbound) {
      const std::string why = fmt::format("TLS with {}: {}", c.address, e.what());
      log(why);
      close(c.id, why);
    } else {
      refuse(c.id, e.what());
    }
    return;
  }
  c.phase = Conn::Phase::tls;
  if (c.outbound) continue_tls(c);  // the connector speaks first
}

void SocketTransport::continue_tls(Conn& c) {
  using Progress = tls::Session::Progress;
  const Progress progress = c.tls->handshake();
  switch (progress) {
    case Progress::want_read:
    case Progress::want_write: {
      const std::uint32_t want =
          (progress == Progress::want_write ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP;
      if (want != c.interest) {
        c.interest = want;
        loop_.modify(c.watch, want);
      }
      return;
    }
    case Progress::done:
      ++stats_.tls;
      if (c.outbound) {
        send_hello(c);
      } else {
        c.phase = Conn::Phase::await_hello;
        update_interest(c);
        read_handshake(c);  // the hello may have come with the handshake's last flight
      }
      return;
    case Progress::closed:
      if (c.outbound) {
        const int rank = c.peer;
        last_refusal_[static_cast<std::size_t>(rank)] =
            fmt::format("TLS handshake with {}: {} (does it run with KUNGFU_TLS=1?)", c.address,
                        c.tls->error());
        close(c.id, "");
        retry_connect(rank, ECONNRESET);
      } else {
        refuse(c.id, c.tls->error());
      }
      return;
    case Progress::failed:
      if (c.outbound) {
        const std::string why =
            fmt::format("TLS handshake with {} failed: {}", c.address, c.tls->error());
        log(why);
        close(c.id, why);
      } else {
        refuse(c.id, "TLS handshake failed: " + c.tls->error());
      }
      return;
  }
}

}  // namespace kf
