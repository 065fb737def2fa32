// Ports for tests that open real sockets, leased so that no two tests running at once (C++,
// Python or shell, under `ctest -j`) can pick the same ones.
//
// The contract, shared with python/tests/conftest.py (lease_ports) and tests/port_lease.sh:
//   - ports 20000-32767 in blocks of 64, below Linux's ephemeral range (32768-60999), so no
//     outgoing connection's local port can land on a leased one;
//   - a block is leased by an exclusive flock on /tmp/kf-test-ports/<first port>.lock, held by
//     the leasing process until it exits (the kernel drops it even on a crash or SIGKILL);
//   - a lease of n ports takes enough consecutive blocks, all or none, and only blocks whose
//     ports can be bound right now (a process outside the tests may hold some).
// Child processes inherit nothing they need: the lease lives in the test process.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace kf::testing {

inline constexpr int kLeaseFirstPort = 20000;
inline constexpr int kLeaseBlock = 64;
inline constexpr int kLeaseBlocks = (32768 - kLeaseFirstPort) / kLeaseBlock;
inline constexpr const char* kLeaseDir = "/tmp/kf-test-ports";

namespace detail {

inline bool can_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as the runtime binds
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// Locks block `b` (its fd kept open for the process's life); false if another process holds it.
inline bool lock_block(int b, std::vector<int>& held) {
  const std::string path =
      std::string(kLeaseDir) + "/" + std::to_string(kLeaseFirstPort + b * kLeaseBlock) + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  held.push_back(fd);
  return true;
}

}  // namespace detail

// The first of `n` consecutive ports leased to this process until it exits; throws if none can
// be found (every block taken), so a test fails naming the cause instead of colliding.
inline std::uint16_t lease_ports(int n) {
  if (n < 1 || n > kLeaseBlocks * kLeaseBlock)
    throw std::invalid_argument("lease_ports: n out of range");
  ::mkdir(kLeaseDir, 01777);
  ::chmod(kLeaseDir, 01777);  // every user's tests share it
  const int blocks = (n + kLeaseBlock - 1) / kLeaseBlock;
  std::mt19937 rng(
      static_cast<unsigned>(::getpid()) * 7919u +
      static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const int starts = kLeaseBlocks - blocks + 1;
  const int offset = static_cast<int>(rng() % static_cast<unsigned>(starts));
  for (int i = 0; i < starts; ++i) {
    const int first_block = (offset + i) % starts;
    std::vector<int> held;
    bool ok = true;
    for (int b = first_block; b < first_block + blocks && ok; ++b)
      ok = detail::lock_block(b, held);
    const int base = kLeaseFirstPort + first_block * kLeaseBlock;
    for (int p = base; p < base + n && ok; ++p)
      ok = detail::can_bind(p);
    if (ok) return static_cast<std::uint16_t>(base);  // `held` fds stay open: the lease
    for (const int fd : held)
      ::close(fd);
  }
  throw std::runtime_error("lease_ports: every port block in 20000-32767 is taken");
}

}  // namespace kf::testing
