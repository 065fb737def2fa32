// Thin wrappers over the BSD socket calls the transport needs: non-blocking listeners and
// connects for TCP (IPv4) and Unix sockets (abstract namespace, so nothing is left on disk), and
// the socket options that matter for throughput and latency.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "real/fd.h"

namespace kf::net {

// Where a peer listens. Same-host peers meet on the Unix socket, others on TCP.
struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
  bool unix_socket = false;
  std::string to_string() const;  // "10.0.0.1:10000" or "unix:kungfu-10.0.0.1-10000"
};

// The abstract Unix socket name of the worker at host:port (without the leading NUL).
std::string unix_name(const std::string& host, std::uint16_t port);

// Listening sockets (non-blocking, close-on-exec). Throw std::system_error naming the address.
Fd listen_on(const Endpoint& endpoint);
// Starts a non-blocking connect; the caller waits for EPOLLOUT and then calls connect_error().
// Throws std::system_error when the connect fails at once with something other than a refusal;
// a refusal comes back through connect_error().
Fd start_connect(const Endpoint& endpoint);
int connect_error(int fd);  // SO_ERROR: 0 once connected
// The host is an IPv4 loopback address (127.0.0.0/8), or a name that resolves to one. False for
// a name that does not resolve.
bool is_loopback(const std::string& host);

// TCP_NODELAY for TCP sockets, and send/receive buffers of `buffer_bytes` (0: leave the kernel's
// autotuning alone).
void tune(int fd, bool tcp, std::size_t buffer_bytes);

std::string errno_text(int err);

}  // namespace kf::net
