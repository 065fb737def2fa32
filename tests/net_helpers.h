// Helpers for tests that open real sockets: a base port with a free range after it, and a peer
// node (loop + socket transport) that records what it receives.
#pragma once

#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "port_lease.h"
#include "real/epoll_loop.h"
#include "real/socket_transport.h"

namespace kf::testing {

struct CommandResult {
  int code = -1;
  std::string output;
};

// Runs a command line (bounded by coreutils' timeout) and captures stdout + stderr. With
// `shell`, the line runs under bash -c (pipes, variables), so it must not hold single quotes.
inline CommandResult run_command(const std::string& cmd, int limit_s = 50, bool shell = false) {
  const std::string full = shell ? fmt::format("timeout -k 5 {} bash -c '{}' 2>&1", limit_s, cmd)
                                 : fmt::format("timeout -k 5 {} {} 2>&1", limit_s, cmd);
  CommandResult r;
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr)
    r.output += buf;
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A base port p such that p .. p+n-1 are leased to this test process (tests/port_lease.h).
inline std::uint16_t free_port_base(int n) {
  return lease_ports(n);
}

// Waits (bounded) until `pred` holds; true if it did.
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// One peer with a socket transport, recording deliveries and losses.
class Node {
 public:
  // keep_lends_unread: payloads a same-host peer lends are kept as they came, not read (as the
  // engine does with a message it cannot use yet), so the lend stays out.
  // The tests' hosts are loopback pseudo-hosts (127.0.0.x): unless `as_deployed`, their TCP
  // pairs share one duplex connection as machines' would (tcp_duplex_loopback).
  Node(const ClusterSpec& cluster, int rank, SocketTransportOptions options = {},
       bool keep_lends_unread = false, bool as_deployed = false) {
    if (!as_deployed) options.tcp_duplex_loopback = true;
    if (!options.log) {
      options.log = [this](const std::string& line) {
        std::lock_guard lock(mu_);
        logs_.push_back(line);
      };
    }
    loop_.call([&] {
      transport_ = std::make_unique<SocketTransport>(loop_, cluster, rank, options);
      transport_->set_handlers({
          .on_message =
              [this](int source, Message m) {
                std::lock_guard lock(mu_);
                received_.push_back({source, std::move(m)});
              },
          .on_peer_lost =
              [this](int peer, Status why) {
                std::lock_guard lock(mu_);
                lost_.push_back({peer, why.message()});
              },
          .remote_payloads = keep_lends_unread,
      });
      transport_->start();
    });
  }
  ~Node() { crash(); }

  void send(int destination, Message m) {
    loop_.post([this, destination, m = std::move(m)]() mutable {
      if (transport_) transport_->send(destination, std::move(m));
    });
  }
  // Closes every socket without a bye, like a killed process.
  void crash() {
    loop_.call([&] { transport_.reset(); });
  }
  // Orderly close; waits for it.
  void shut_down() {
    std::promise<void> done;
    loop_.call([&] { transport_->shutdown(std::chrono::seconds(3), [&] { done.set_value(); }); });
    done.get_future().wait_for(std::chrono::seconds(5));
    crash();
  }
  bool connected() {
    return loop_.call([&] { return transport_ && transport_->all_connected(); });
  }
  std::size_t lent_outstanding() {
    return loop_.call([&] { return transport_ ? transport_->lent_outstanding() : 0; });
  }
  SocketTransportStats stats() {
    return loop_.call([&] { return transport_ ? transport_->stats() : SocketTransportStats{}; });
  }

  struct Received {
    int source;
    Message message;
  };
  struct Lost {
    int peer;
    std::string why;
  };
  std::size_t received_count() {
    std::lock_guard lock(mu_);
    return received_.size();
  }
  std::vector<Received> take_received() {
    std::lock_guard lock(mu_);
    return std::move(received_);
  }
  std::vector<Lost> lost() {
    std::lock_guard lock(mu_);
    return lost_;
  }
  std::string logs() {
    std::lock_guard lock(mu_);
    std::string all;
    for (const auto& l : logs_)
      all += l + "\n";
    return all;
  }

 private:
  EpollLoop loop_;
  std::unique_ptr<SocketTransport> transport_;
  std::mutex mu_;
  std::vector<Received> received_;
  std::vector<Lost> lost_;
  std::vector<std::string> logs_;
};

}  // namespace kf::testing
