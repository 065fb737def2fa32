// SocketTransport's spine: construction and destruction, start (listen, then connect to every
// other peer), handlers, logging, each socket's events dispatched by the phase of its connection,
// and closing: connections, lost and departed peers, the orderly shutdown. The other jobs live
// beside it: socket_transport_connect.cc (connecting, accepting, the handshake), _receive.cc
// (reading frames), _send.cc (the write queues) and _lend.cc (lending and borrowing payloads).
#include "real/socket_transport.h"

#include <sys/epoll.h>

#include <fmt/format.h>

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "real/socket_conn.h"

namespace kf {
namespace {

constexpr std::size_t kStagingBytes = 256u << 10;

}  // namespace

SocketTransport::SocketTransport(EpollLoop& loop, ClusterSpec cluster, int rank,
                                 SocketTransportOptions options)
    : loop_(loop), cluster_(std::move(cluster)), rank_(rank), options_(std::move(options)) {
  const auto n = static_cast<std::size_t>(cluster_.size());
  outbound_.assign(n, 0);
  inbound_.assign(n, 0);
  route_.assign(n, Route::own);
  waiting_.resize(n);
  connect_deadline_.assign(n, TimePoint{});
  backoff_.assign(n, socket_detail::kFirstBackoff);
  last_refusal_.assign(n, "");
  lost_.assign(n, false);
  departed_.assign(n, false);
  pending_acks_.resize(n);
  staging_.resize(kStagingBytes);
  // A program that built its options without TLS still honours KUNGFU_TLS=1: never plaintext
  // where the job asked for TLS.
  if (!options_.tls) options_.tls = tls::context_from_process_env();
  loop_.add_poller(this);
}

SocketTransport::~SocketTransport() {
  *alive_ = false;
  loop_.remove_poller(this);
  if (shutdown_timer_ != 0) loop_.cancel(shutdown_timer_);
  for (auto& [id, c] : conns_) {
    loop_.unwatch(c->watch);
    if (c->hs_timer != 0) loop_.cancel(c->hs_timer);
    if (c->ring_retry != 0) loop_.cancel(c->ring_retry);
  }
  for (auto w : listener_watches_)
    loop_.unwatch(w);
}

void SocketTransport::log(const std::string& line) const {
  if (options_.log) {
    options_.log(line);
  } else {
    std::fprintf(stderr, "[kf] rank %d: %s\n", rank_, line.c_str());
  }
}

net::Endpoint SocketTransport::endpoint_of(int rank) const {
  const PeerID& id = cluster_.worker(rank);
  const bool same_host = id.host == cluster_.worker(rank_).host;
  return net::Endpoint{id.host, id.port, options_.unix_sockets && same_host};
}

void SocketTransport::start() {
  if (started_) return;
  started_ = true;
  wants_duplex_.assign(static_cast<std::size_t>(cluster_.size()), false);
  for (int r = 0; r < cluster_.size(); ++r) {
    const net::Endpoint e = endpoint_of(r);
    wants_duplex_[static_cast<std::size_t>(r)] =
        r != rank_ && options_.tcp_duplex && !e.unix_socket &&
        (options_.tcp_duplex_loopback || !net::is_loopback(e.host));
  }
  net::Endpoint self = endpoint_of(rank_);
  self.unix_socket = false;
  listeners_.push_back(net::listen_on(self));
  if (options_.unix_sockets) {
    self.unix_socket = true;
    listeners_.push_back(net::listen_on(self));
  }
  for (const Fd& l : listeners_) {
    const Fd* lp = &l;
    listener_watches_.push_back(
        loop_.watch(l.get(), EPOLLIN, [this, lp](std::uint32_t) { on_accept(*lp); }));
    loop_.set_quiet(listener_watches_.back(), true);  // connections come once
  }
  const TimePoint deadline = loop_.now() + options_.connect_timeout;
  for (int r = 0; r < cluster_.size(); ++r) {
    if (r == rank_) continue;
    connect_deadline_[static_cast<std::size_t>(r)] = deadline;
    if (r < rank_ && wants_duplex(r)) await_duplex(r);
    connect_to(r);
  }
}

void SocketTransport::await_duplex(int rank) {
  route_[static_cast<std::size_t>(rank)] = Route::awaiting_theirs;
  loop_.post_after(options_.connect_timeout, [this, alive = alive_, rank] {
    const auto r = static_cast<std::size_t>(rank);
    if (!*alive || route_[r] != Route::awaiting_theirs || lost_[r] || departed_[r] ||
        shutting_down_) {
      return;
    }
    lose_peer(rank,
              fmt::format("{} did not connect to us within {:.0f}s", endpoint_of(rank).to_string(),
                          to_seconds(options_.connect_timeout)));
  });
}

SocketTransport::ConnId SocketTransport::sending_conn(int rank) const {
  const auto r = static_cast<std::size_t>(rank);
  switch (route_[r]) {
    case Route::own:
      return outbound_[r];
    case Route::theirs:
      return inbound_[r];
    case Route::awaiting_theirs:
      break;
  }
  return 0;
}

bool SocketTransport::can_send_to(int rank) const {
  const auto it = conns_.find(sending_conn(rank));
  return it != conns_.end() && it->second->phase == Conn::Phase::established;
}

void SocketTransport::set_handlers(Handlers handlers) {
  handlers_ = std::move(handlers);
}

bool SocketTransport::all_connected() const {
  for (int r = 0; r < cluster_.size(); ++r) {
    if (r == rank_) continue;
    const auto it = conns_.find(outbound_[static_cast<std::size_t>(r)]);
    if (it == conns_.end() || it->second->phase != Conn::Phase::established) return false;
    if (!can_send_to(r)) return false;
  }
  return true;
}

bool SocketTransport::connecting_settled() const {
  for (int r = 0; r < cluster_.size(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r == rank_ || lost_[i] || departed_[i]) continue;
    const auto it = conns_.find(outbound_[i]);
    if (it == conns_.end() || it->second->phase != Conn::Phase::established) return false;
    if (!can_send_to(r)) return false;
  }
  return true;
}

std::vector<int> SocketTransport::unconnected() const {
  std::vector<int> out;
  for (int r = 0; r < cluster_.size(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r == rank_ || departed_[i]) continue;
    const auto it = conns_.find(outbound_[i]);
    if (it == conns_.end() || it->second->phase != Conn::Phase::established || !can_send_to(r)) {
      out.push_back(r);
    }
  }
  return out;
}

// ---- events ----

void SocketTransport::on_event(ConnId id, std::uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.phase == Conn::Phase::connecting) {
    on_connected(c);
    return;
  }
  if (c.phase == Conn::Phase::tls) {
    continue_tls(c);
    return;
  }
  if ((events & EPOLLOUT) != 0 && c.phase == Conn::Phase::established) {
    flush(c);
    if (!conns_.contains(id)) return;
  }
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
    if (c.phase == Conn::Phase::established) {
      read_frames(c);
    } else {
      read_handshake(c);
    }
    // Bytes TLS has read ahead wake no epoll: come back for them (reads stop at a budget).
    const auto again = conns_.find(id);
    if (again != conns_.end() && again->second->tls && again->second->tls->has_pending()) {
      loop_.post([this, alive = alive_, id] {
        if (*alive) on_event(id, EPOLLIN);
      });
    }
  }
}

// ---- closing ----

void SocketTransport::close(ConnId id, const std::string& why) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::unique_ptr<Conn> c = std::move(it->second);
  conns_.erase(it);
  loop_.unwatch(c->watch);
  if (c->hs_timer != 0) loop_.cancel(c->hs_timer);
  if (c->ring_retry != 0) loop_.cancel(c->ring_retry);
  if (c->ring && !c->outbound) std::erase(ring_readers_, id);
  if (c->peer >= 0) {
    auto& slot = (c->outbound ? outbound_ : inbound_)[static_cast<std::size_t>(c->peer)];
    if (slot == id) slot = 0;
  }
  const bool is_loss = !why.empty() && c->peer >= 0 && !shutting_down_ &&
                       !departed_[static_cast<std::size_t>(c->peer)] &&
                       (c->outbound || c->phase == Conn::Phase::established);
  const int peer = c->peer;
  c.reset();  // closes the socket
  if (is_loss) lose_peer(peer, why);
  maybe_finish_shutdown();
}

void SocketTransport::refuse(ConnId id, const std::string& why) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  ++stats_.refused;
  refusal_log_.log(fmt::format("refused {}: {}", it->second->address, why));
  close(id, "");  // a stranger is not a peer: nothing to report to the engine
}

void SocketTransport::lose_peer(int rank, const std::string& why) {
  const auto r = static_cast<std::size_t>(rank);
  if (lost_[r]) return;
  // What the peer wrote into its ring before it went is delivered first, whichever of its two
  // connections showed the end first: a socket's bytes are read before its end the same way.
  if (const auto it = conns_.find(inbound_[r]);
      it != conns_.end() && it->second->ring && it->second->phase == Conn::Phase::established) {
    bool found = false;
    drain_ring(it->first, found);
    if (lost_[r]) return;  // draining found it broken, and lost it already
  }
  lost_[r] = true;
  waiting_[r].clear();
  pending_acks_[r].clear();
  std::erase_if(lent_, [rank](const auto& kv) { return kv.second.rank == rank; });
  close(outbound_[r], "");
  close(inbound_[r], "");
  if (shutting_down_) return;
  log(fmt::format("lost rank {} ({}): {}", rank, cluster_.worker(rank).to_string(), why));
  // Posted, never called from here: we may be inside the engine's own send(), and the engine
  // fails (destroys) operations when told.
  loop_.post([this, alive = alive_, rank, why] {
    if (*alive && handlers_.on_peer_lost) {
      handlers_.on_peer_lost(rank, Status(ErrorCode::peer_lost, why));
    }
  });
}

void SocketTransport::depart(int rank) {
  const auto r = static_cast<std::size_t>(rank);
  departed_[r] = true;
  waiting_[r].clear();
  std::erase_if(lent_, [rank](const auto& kv) { return kv.second.rank == rank; });
}

void SocketTransport::shutdown(Duration limit, std::function<void()> done) {
  if (shutting_down_) return;
  shutting_down_ = true;
  handlers_ = {};
  shutdown_done_ = std::move(done);
  for (auto w : listener_watches_)
    loop_.unwatch(w);
  listener_watches_.clear();
  listeners_.clear();
  std::vector<ConnId> ids;
  for (const auto& [id, c] : conns_)
    ids.push_back(id);
  for (const ConnId id : ids) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    if (it->second->phase == Conn::Phase::established) {
      enqueue_bye(*it->second);
    } else {
      close(id, "");
    }
  }
  shutdown_timer_ = loop_.post_after(limit, [this, alive = alive_] {
    if (!*alive) return;
    shutdown_timer_ = 0;
    std::vector<ConnId> left;
    for (const auto& [id, c] : conns_)
      left.push_back(id);
    for (const ConnId id : left)
      close(id, "");
    maybe_finish_shutdown();
  });
  maybe_finish_shutdown();
}

void SocketTransport::maybe_finish_shutdown() {
  if (!shutting_down_ || !conns_.empty() || !shutdown_done_) return;
  if (shutdown_timer_ != 0) loop_.cancel(shutdown_timer_);
  shutdown_timer_ = 0;
  auto done = std::move(shutdown_done_);
  shutdown_done_ = nullptr;
  loop_.post(std::move(done));
}

}  // namespace kf
