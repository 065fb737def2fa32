// SocketTransport's connections and their handshake. As the source, this peer connects to each
// destination (retrying with backoff until the connect deadline), says hello and checks the
// welcome; as the destination, it accepts, judges the hello, checks the proof, and refuses anyone
// who fails (refused strangers are logged, never reported as lost peers). A connection is used
// for frames only once it is established.
#include "real/socket_transport.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "real/handshake.h"
#include "real/socket_conn.h"
#include "real/sockets.h"
#include "real/wire.h"

namespace kf {

// ---- connecting (this peer is the source) ----

void SocketTransport::connect_to(int rank) {
  const auto r = static_cast<std::size_t>(rank);
  if (lost_[r] || departed_[r] || shutting_down_ || outbound_[r] != 0) return;
  const net::Endpoint e = endpoint_of(rank);
  Fd fd;
  try {
    fd = net::start_connect(e);
  } catch (const std::system_error& err) {
    lose_peer(rank, err.what());
    return;
  }
  auto c = std::make_unique<Conn>();
  c->id = next_conn_++;
  c->fd = std::move(fd);
  c->outbound = true;
  c->tcp = !e.unix_socket;
  c->peer = rank;
  c->address = e.to_string();
  c->phase = Conn::Phase::connecting;
  c->interest = EPOLLOUT;
  const ConnId id = c->id;
  c->watch =
      loop_.watch(c->fd.get(), c->interest, [this, id](std::uint32_t ev) { on_event(id, ev); });
  outbound_[r] = id;
  conns_.emplace(id, std::move(c));
}

void SocketTransport::retry_connect(int rank, int err) {
  const auto r = static_cast<std::size_t>(rank);
  if (loop_.now() >= connect_deadline_[r]) {
    lose_peer(rank,
              fmt::format("cannot connect to {} within {:.0f}s: {}", endpoint_of(rank).to_string(),
                          to_seconds(options_.connect_timeout),
                          last_refusal_[r].empty() ? net::errno_text(err) : last_refusal_[r]));
    return;
  }
  const Duration wait = backoff_[r];
  backoff_[r] = std::min(backoff_[r] * 2, socket_detail::kMaxBackoff);
  loop_.post_after(wait, [this, alive = alive_, rank] {
    if (*alive) connect_to(rank);
  });
}

void SocketTransport::on_connected(Conn& c) {
  const int err = net::connect_error(c.fd.get());
  if (err != 0) {
    const int rank = c.peer;
    close(c.id, "");
    retry_connect(rank, err);
    return;
  }
  net::tune(c.fd.get(), c.tcp, c.tcp ? options_.tcp_buffer_bytes : options_.unix_buffer_bytes);
  if (c.tcp && options_.tls) {
    start_tls(c);  // says hello once TLS is up
    return;
  }
  send_hello(c);
}

void SocketTransport::send_hello(Conn& c) {
  c.hello = handshake::Hello{.secured = !options_.secret.empty(),
                             .cluster_version = cluster_.version(),
                             .source_rank = static_cast<std::uint32_t>(rank_),
                             .destination_rank = static_cast<std::uint32_t>(c.peer),
                             .nonce = handshake::fresh_nonce()};
  c.hello.duplex = c.tcp && rank_ < c.peer && wants_duplex(c.peer);
  if (options_.lend_payloads && !c.tcp) {
    c.hello.nonce_address = reinterpret_cast<std::uintptr_t>(c.hello.nonce.data());
    if (options_.shm_ring_bytes != 0) {
      try {
        c.ring = ShmRing::create(options_.shm_ring_bytes, c.hello.nonce);
        c.hello.ring_fd = static_cast<std::uint32_t>(c.ring->fd());
        c.hello.ring_bytes = static_cast<std::uint32_t>(c.ring->capacity());
      } catch (const std::exception& e) {
        log(fmt::format("no shared-memory ring to rank {} ({}): frames go through the socket",
                        c.peer, e.what()));
      }
    }
  }
  if (!c.write_all(handshake::encode(c.hello))) {
    // Cut before any verdict, like a connection closed while we wait for the welcome (see
    // read_handshake): the peer's listener is being replaced. Try again within the deadline.
    const int code = errno;
    const int rank = c.peer;
    close(c.id, "");
    retry_connect(rank, code);
    return;
  }
  c.phase = Conn::Phase::await_welcome;
  c.hs_need = handshake::kWelcomeBytes;
  update_interest(c);
}

void SocketTransport::take_welcome(Conn& c) {
  const auto w = handshake::decode_welcome(c.hs);
  if (!w) {
    close(c.id,
          fmt::format("{} answered with something that is not a KungFu handshake", c.address));
    return;
  }
  switch (handshake::judge_welcome(*w, c.hello, cluster_.version(), options_.secret)) {
    case handshake::WelcomeOutcome::retry: {
      // The peer is still on the previous cluster version (an elastic resize in progress) and
      // will listen with ours shortly: try again, within the usual connect deadline.
      const int rank = c.peer;
      last_refusal_[static_cast<std::size_t>(rank)] =
          fmt::format("{} refused us: {} (ours {}, theirs {})", c.address,
                      handshake::verdict_name(w->verdict), cluster_.version(), w->cluster_version);
      close(c.id, "");
      retry_connect(rank, ECONNREFUSED);
      return;
    }
    case handshake::WelcomeOutcome::refused: {
      const std::string why =
          fmt::format("{} refused our connection: {} (ours {}, theirs {})", c.address,
                      handshake::verdict_name(w->verdict), cluster_.version(), w->cluster_version);
      log(why);
      close(c.id, why);
      return;
    }
    case handshake::WelcomeOutcome::forged: {
      const std::string why = fmt::format(
          "{} failed authentication (it holds a different secret, or we are missing one)",
          c.address);
      log(why);
      close(c.id, why);
      return;
    }
    case handshake::WelcomeOutcome::accept:
      break;
  }
  if (!c.write_all([&] {
        const auto mac = handshake::connector_mac(options_.secret, c.hello, w->nonce);
        return std::vector<std::byte>(mac.begin(), mac.end());
      }())) {
    close(c.id, fmt::format("handshake with {} failed: {}", c.address, c.io_error(errno)));
    return;
  }
  c.phase = Conn::Phase::established;
  c.lend = (w->flags & handshake::kWelcomeLend) != 0;
  c.duplex = c.hello.duplex && (w->flags & handshake::kWelcomeDuplex) != 0;
  if (c.duplex) {
    ++stats_.duplex;
    land_payloads(c);
  }
  if (c.ring && (w->flags & handshake::kWelcomeRing) != 0) {
    c.ring->close_fd();  // mapped on the other side: the memory stays while either maps it
    loop_.set_quiet(c.watch, true);  // its socket now carries only doorbells and its end
    ++stats_.rings;
  } else {
    c.ring.reset();
  }
  if (sending_conn(c.peer) == c.id) start_sending(c);
}

void SocketTransport::start_sending(Conn& c) {
  auto& waiting = waiting_[static_cast<std::size_t>(c.peer)];
  for (auto& m : waiting)
    enqueue(c, std::move(m));
  waiting.clear();
  for (const auto id : std::exchange(pending_acks_[static_cast<std::size_t>(c.peer)], {}))
    c.out.push_back({wire::encode_ack(id), Message{}});
  flush(c);
}

// ---- accepting (this peer is the destination) ----

void SocketTransport::on_accept(const Fd& listener) {
  for (;;) {
    Fd fd(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;  // EAGAIN, or a transient error: the next readiness event retries
    if (shutting_down_) continue;
    auto c = std::make_unique<Conn>();
    c->id = next_conn_++;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    ::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    c->tcp = addr.ss_family == AF_INET;
    c->fd = std::move(fd);
    c->outbound = false;
    c->address = c->tcp ? "a TCP peer" : "a Unix-socket peer";
    c->phase = Conn::Phase::await_hello;
    c->hs_need = handshake::kHelloBytes;
    c->interest = EPOLLIN | EPOLLRDHUP;
    const ConnId id = c->id;
    c->watch =
        loop_.watch(c->fd.get(), c->interest, [this, id](std::uint32_t ev) { on_event(id, ev); });
    c->hs_timer = loop_.post_after(options_.handshake_timeout, [this, alive = alive_, id] {
      if (!*alive) return;
      const auto it = conns_.find(id);
      if (it == conns_.end()) return;
      it->second->hs_timer = 0;
      refuse(id, "no complete handshake in time");
    });
    Conn& conn = *c;
    conns_.emplace(id, std::move(c));
    if (conn.tcp && options_.tls) start_tls(conn);  // the hello comes inside TLS
  }
}

void SocketTransport::accept_hello(Conn& c) {
  using handshake::Verdict;
  const auto h = handshake::decode_hello(c.hs);
  if (!h) {
    refuse(c.id, "not a KungFu handshake");
    return;
  }
  c.hello = *h;
  const auto [verdict, why] =
      handshake::judge_hello(*h, cluster_.version(), rank_, cluster_.size());
  handshake::Welcome w{.verdict = verdict, .cluster_version = cluster_.version()};
  if (verdict == Verdict::ok && !c.tcp && options_.lend_payloads && h->nonce_address != 0) {
    // Can we read the connector's memory? Read its nonce where it says it is.
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(c.fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.pid > 0) {
      handshake::Nonce seen{};
      iovec local{seen.data(), seen.size()};
      iovec remote{reinterpret_cast<void*>(h->nonce_address), seen.size()};
      if (::process_vm_readv(cred.pid, &local, 1, &remote, 1, 0) ==
              static_cast<ssize_t>(seen.size()) &&
          seen == h->nonce) {
        c.peer_pid = cred.pid;
        w.flags |= handshake::kWelcomeLend;
        if (h->ring_bytes != 0 && options_.shm_ring_bytes != 0) {
          std::string refusal;
          c.ring = ShmRing::open_peer(cred.pid, static_cast<int>(h->ring_fd), h->ring_bytes,
                                      h->nonce, refusal);
          if (c.ring) {
            w.flags |= handshake::kWelcomeRing;
          } else {
            log(
                fmt::format("not using the shared-memory ring of rank {} ({}): its frames come "
                            "through the socket",
                            h->source_rank, refusal));
          }
        }
      }
    }
  }
  if (verdict == Verdict::ok && c.tcp && h->duplex && static_cast<int>(h->source_rank) < rank_ &&
      wants_duplex(static_cast<int>(h->source_rank))) {
    w.flags |= handshake::kWelcomeDuplex;
    c.duplex = true;
  }
  if (verdict == Verdict::ok) {
    c.nonce = handshake::fresh_nonce();
    w.nonce = c.nonce;
    w.mac = handshake::acceptor_mac(options_.secret, c.hello, c.nonce);
  }
  const bool sent = c.write_all(handshake::encode(w));
  if (verdict != Verdict::ok) {
    refuse(c.id, why);
    return;
  }
  if (!sent) {
    refuse(c.id, "handshake write failed");
    return;
  }
  c.phase = Conn::Phase::await_proof;
  c.hs.clear();
  c.hs_need = handshake::kProofBytes;
}

void SocketTransport::accept_proof(Conn& c) {
  const auto want = handshake::connector_mac(options_.secret, c.hello, c.nonce);
  if (!handshake::same_mac(want, c.hs)) {
    const char* detail = !c.hello.secured          ? "it has no secret"
                         : options_.secret.empty() ? "it has a secret and we have none"
                                                   : "it holds a different secret";
    refuse(c.id, fmt::format("connection claiming rank {} failed authentication: {}",
                             c.hello.source_rank, detail));
    return;
  }
  if (c.hs_timer != 0) loop_.cancel(c.hs_timer);
  c.hs_timer = 0;
  c.phase = Conn::Phase::established;
  c.peer = static_cast<int>(c.hello.source_rank);
  c.address = endpoint_of(c.peer).to_string();
  land_payloads(c);
  net::tune(c.fd.get(), c.tcp, c.tcp ? options_.tcp_buffer_bytes : options_.unix_buffer_bytes);
  auto& slot = inbound_[static_cast<std::size_t>(c.peer)];
  if (slot != 0 && slot != c.id) close(slot, "");  // a reconnect replaces the old stream
  slot = c.id;
  if (c.ring) {
    ring_readers_.push_back(c.id);
    loop_.set_quiet(c.watch, true);  // its socket now carries only doorbells and its end
    ++stats_.rings;
  }
  auto& route = route_[static_cast<std::size_t>(c.peer)];
  if (c.duplex) {
    ++stats_.duplex;
    route = Route::theirs;
    start_sending(c);
  } else if (route != Route::own) {
    // The lower rank sends on a connection of its own (its duplex is off): so do we, on ours.
    route = Route::own;
    if (const auto it = conns_.find(outbound_[static_cast<std::size_t>(c.peer)]);
        it != conns_.end() && it->second->phase == Conn::Phase::established) {
      start_sending(*it->second);
    }
  }
}

bool SocketTransport::read_handshake(Conn& c) {
  const ConnId id = c.id;
  while (c.hs.size() < c.hs_need) {
    const std::size_t have = c.hs.size();
    c.hs.resize(c.hs_need);
    const ssize_t n = c.read_some(c.hs.data() + have, c.hs_need - have);
    c.hs.resize(have + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    const int code = n == 0 ? ECONNRESET : errno;
    const std::string err = n == 0 ? "closed" : c.io_error(code);
    if (c.outbound && c.tls_failed(code)) {
      // TLS 1.3 checks the connector's certificate after the connector's handshake is done, so
      // a refusal of ours arrives here, as an alert: final, not a cut to retry.
      const std::string why = fmt::format("{} refused us: {}", c.address, err);
      log(why);
      close(id, why);
      return false;
    }
    if (c.outbound) {
      // Cut before any verdict: the peer is starting, or is replacing its transport for a new
      // cluster version (elastic resize). Try again within the connect deadline; a refusal
      // proper comes as a verdict, never as this.
      const int rank = c.peer;
      close(id, "");
      retry_connect(rank, code);
    } else {
      refuse(id, fmt::format("connection {} during the handshake", err));
    }
    return false;
  }
  switch (c.phase) {
    case Conn::Phase::await_welcome:
      take_welcome(c);
      break;
    case Conn::Phase::await_hello:
      accept_hello(c);
      if (conns_.contains(id) && c.phase == Conn::Phase::await_proof) return read_handshake(c);
      break;
    case Conn::Phase::await_proof:
      accept_proof(c);
      // Frames may already wait behind the proof.
      if (conns_.contains(id) && c.phase == Conn::Phase::established) read_frames(c);
      break;
    default:
      break;
  }
  return conns_.contains(id);
}

}  // namespace kf
