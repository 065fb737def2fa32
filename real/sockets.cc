#include "real/sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace kf::net {
namespace {

[[noreturn]] void fail(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

sockaddr_in ipv4_of(const Endpoint& e) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(e.port);
  if (::inet_pton(AF_INET, e.host.c_str(), &a.sin_addr) == 1) return a;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* res = nullptr;
  if (::getaddrinfo(e.host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    fail(EINVAL, fmt::format("cannot resolve host '{}'", e.host));
  }
  a.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  ::freeaddrinfo(res);
  return a;
}

}  // namespace

bool is_loopback(const std::string& host) {
  try {
    const sockaddr_in a = ipv4_of(Endpoint{host, 0, false});
    return (ntohl(a.sin_addr.s_addr) >> 24) == 127;
  } catch (const std::system_error&) {
    return false;
  }
}

namespace {

// Abstract-namespace address: sun_path starts with NUL; the length covers exactly the name.
socklen_t unix_addr(const Endpoint& e, sockaddr_un& a) {
  a = {};
  a.sun_family = AF_UNIX;
  const std::string name = unix_name(e.host, e.port);
  const std::size_t n = std::min(name.size(), sizeof(a.sun_path) - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

Fd new_socket(bool unix_socket) {
  Fd fd(::socket(unix_socket ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) fail(errno, "socket");
  return fd;
}

}  // namespace

std::string Endpoint::to_string() const {
  return unix_socket ? "unix:" + unix_name(host, port) : fmt::format("{}:{}", host, port);
}

std::string unix_name(const std::string& host, std::uint16_t port) {
  return fmt::format("kungfu-{}-{}", host, port);
}

std::string errno_text(int err) {
  return std::system_category().message(err);
}

Fd listen_on(const Endpoint& e) {
  Fd fd = new_socket(e.unix_socket);
  int rc;
  if (e.unix_socket) {
    sockaddr_un a;
    const socklen_t len = unix_addr(e, a);
    rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), len);
  } else {
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const sockaddr_in a = ipv4_of(e);
    rc = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a);
  }
  if (rc != 0) fail(errno, fmt::format("cannot listen on {}", e.to_string()));
  if (::listen(fd.get(), 128) != 0) fail(errno, fmt::format("listen on {}", e.to_string()));
  return fd;
}

Fd start_connect(const Endpoint& e) {
  Fd fd = new_socket(e.unix_socket);
  int rc;
  if (e.unix_socket) {
    sockaddr_un a;
    const socklen_t len = unix_addr(e, a);
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), len);
  } else {
    const sockaddr_in a = ipv4_of(e);
    rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a);
  }
  if (rc == 0 || errno == EINPROGRESS || errno == EAGAIN) return fd;
  if (errno == ECONNREFUSED || errno == ENOENT || errno == ETIMEDOUT || errno == ENETUNREACH ||
      errno == EHOSTUNREACH) {
    return fd;  // connect_error() reports it; the caller retries
  }
  fail(errno, fmt::format("connect to {}", e.to_string()));
}

int connect_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  if (err != 0) return err;
  // A refused Unix connect leaves no SO_ERROR; an unconnected socket has no peer.
  sockaddr_storage peer{};
  socklen_t plen = sizeof peer;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) return ECONNREFUSED;
  return 0;
}

void tune(int fd, bool tcp, std::size_t buffer_bytes) {
  if (tcp) {
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  if (buffer_bytes == 0) return;
  const int bytes = static_cast<int>(buffer_bytes);
  // The FORCE variants pass the sysctl caps when we may (root); otherwise the plain ones apply,
  // capped by net.core.{w,r}mem_max.
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof bytes) != 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  }
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }
}

}  // namespace kf::net
