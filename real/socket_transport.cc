#include "real/socket_transport.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <mutex>
#include <system_error>

#include "real/handshake.h"
#include "real/wire.h"

namespace kf {
namespace {

constexpr std::size_t kStagingBytes = 256u << 10;
constexpr std::size_t kDirectMin = 64u << 10;   // smaller payload remainders go via staging
constexpr std::size_t kReadBudget = 16u << 20;  // per readiness event, so one peer cannot hog
constexpr int kMaxIov = 64;
constexpr Duration kFirstBackoff = std::chrono::milliseconds(5);
constexpr Duration kMaxBackoff = std::chrono::seconds(1);

// Lend slots: one per payload lent out, in memory that is never freed (a receiver may read a
// slot long after its lend ended, and must then find it cleared, never unmapped). Shared by every
// transport of the process; ids are never reused.
class LendSlots {
 public:
  static LendSlots& instance() {
    static auto* slots = new LendSlots;  // never destroyed: peers may read slots until we exit
    return *slots;
  }
  // A free slot, now holding a fresh id (returned in *id).
  std::atomic<std::uint64_t>* take(std::uint64_t* id) {
    std::lock_guard lock(mu_);
    *id = ++last_id_;
    std::atomic<std::uint64_t>* slot;
    if (free_.empty()) {
      slot = &slots_.emplace_back(0);
    } else {
      slot = free_.back();
      free_.pop_back();
    }
    slot->store(*id, std::memory_order_seq_cst);
    return slot;
  }
  void release(std::atomic<std::uint64_t>* slot) {
    slot->store(0, std::memory_order_seq_cst);  // before the owner may change the bytes
    std::lock_guard lock(mu_);
    free_.push_back(slot);
  }

 private:
  std::mutex mu_;
  std::uint64_t last_id_ = 0;
  std::deque<std::atomic<std::uint64_t>> slots_;  // a deque never moves its elements
  std::vector<std::atomic<std::uint64_t>*> free_;
};

// Writes a whole handshake message. They are tiny and go first on a fresh socket, so the
// kernel's buffer always takes them at once; anything less is treated as a broken connection.
bool send_all(int fd, const std::vector<std::byte>& bytes) {
  const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return n == static_cast<ssize_t>(bytes.size());
}

}  // namespace

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

void SocketTransport::SlotRelease::operator()(std::atomic<std::uint64_t>* slot) const {
  LendSlots::instance().release(slot);
}

// A payload a same-host peer lent us, read from its memory on demand. Dropping it acks the lend.
class SocketTransport::LentSource final : public PayloadSource {
 public:
  LentSource(SocketTransport& transport, const Conn& c, const wire::Lent& lent)
      : transport_(transport),
        alive_(transport.alive_),
        conn_(c.id),
        peer_(c.peer),
        pid_(c.peer_pid),
        who_(fmt::format("rank {} ({})", c.peer, transport.cluster_.worker(c.peer).to_string())),
        lent_(lent) {}
  ~LentSource() override {
    if (*alive_) transport_.send_ack(peer_, lent_.id);
  }
  LentSource(const LentSource&) = delete;
  LentSource& operator=(const LentSource&) = delete;

  bool read(std::size_t offset, std::byte* into, std::size_t size) override {
    for (std::size_t done = 0; done < size;) {
      iovec local{into + done, size - done};
      iovec remote{reinterpret_cast<void*>(lent_.address + offset + done), size - done};
      const ssize_t n = pid_ > 0 ? ::process_vm_readv(pid_, &local, 1, &remote, 1, 0) : -1;
      if (n <= 0) {
        const int err = pid_ > 0 ? errno : EPERM;
        if (!verify()) return false;  // withdrawn, or gone: that says more than this error
        broken(net::errno_text(err));
        return false;
      }
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  bool verify() override {
    // The payload's reads come first. (TSan cannot model fences; it never sees these reads
    // anyway: the kernel makes them.)
#if defined(__SANITIZE_THREAD__)
    std::atomic_signal_fence(std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_acquire);
#endif
    std::uint64_t now = 0;
    iovec local{&now, sizeof now};
    iovec remote{reinterpret_cast<void*>(lent_.slot), sizeof now};
    const ssize_t n = pid_ > 0 ? ::process_vm_readv(pid_, &local, 1, &remote, 1, 0) : -1;
    if (n != static_cast<ssize_t>(sizeof now)) {
      broken(net::errno_text(pid_ > 0 ? errno : EPERM));
      return false;
    }
    if (now != lent_.id) {
      error_ = fmt::format("{} took back the payload it lent (its operation ended first)", who_);
      return false;
    }
    return true;
  }

  std::string error() const override {
    return error_;
  }

 private:
  // The peer's memory cannot be read (it died, or broke the protocol): the connection goes too,
  // so every pending operation learns that the peer is lost. Posted: we are inside a reader.
  void broken(const std::string& why) {
    error_ = fmt::format("cannot copy a lent payload from {}: {}", who_, why);
    if (!*alive_) return;
    transport_.loop_.post([t = &transport_, alive = alive_, conn = conn_, error = error_] {
      if (*alive) t->close(conn, error);
    });
  }

  SocketTransport& transport_;
  std::shared_ptr<bool> alive_;
  ConnId conn_;
  int peer_;
  pid_t pid_;
  std::string who_;  // "rank 2 (127.0.0.1:10002)"
  wire::Lent lent_;
  std::string error_;
};

SocketTransport::SocketTransport(EpollLoop& loop, ClusterSpec cluster, int rank,
                                 SocketTransportOptions options)
    : loop_(loop), cluster_(std::move(cluster)), rank_(rank), options_(std::move(options)) {
  const auto n = static_cast<std::size_t>(cluster_.size());
  outbound_.assign(n, 0);
  inbound_.assign(n, 0);
  waiting_.resize(n);
  connect_deadline_.assign(n, TimePoint{});
  backoff_.assign(n, kFirstBackoff);
  last_refusal_.assign(n, "");
  lost_.assign(n, false);
  departed_.assign(n, false);
  pending_acks_.resize(n);
  staging_.resize(kStagingBytes);
}

SocketTransport::~SocketTransport() {
  *alive_ = false;
  if (shutdown_timer_ != 0) loop_.cancel(shutdown_timer_);
  for (auto& [id, c] : conns_) {
    loop_.unwatch(c->watch);
    if (c->hs_timer != 0) loop_.cancel(c->hs_timer);
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
  }
  const TimePoint deadline = loop_.now() + options_.connect_timeout;
  for (int r = 0; r < cluster_.size(); ++r) {
    if (r == rank_) continue;
    connect_deadline_[static_cast<std::size_t>(r)] = deadline;
    connect_to(r);
  }
}

void SocketTransport::set_handlers(Handlers handlers) {
  handlers_ = std::move(handlers);
}

bool SocketTransport::all_connected() const {
  for (int r = 0; r < cluster_.size(); ++r) {
    if (r == rank_) continue;
    const auto it = conns_.find(outbound_[static_cast<std::size_t>(r)]);
    if (it == conns_.end() || it->second->phase != Conn::Phase::established) return false;
  }
  return true;
}

bool SocketTransport::connecting_settled() const {
  for (int r = 0; r < cluster_.size(); ++r) {
    const auto i = static_cast<std::size_t>(r);
    if (r == rank_ || lost_[i] || departed_[i]) continue;
    const auto it = conns_.find(outbound_[i]);
    if (it == conns_.end() || it->second->phase != Conn::Phase::established) return false;
  }
  return true;
}

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
  backoff_[r] = std::min(backoff_[r] * 2, kMaxBackoff);
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
  c.hello = handshake::Hello{.secured = !options_.secret.empty(),
                             .cluster_version = cluster_.version(),
                             .source_rank = static_cast<std::uint32_t>(rank_),
                             .destination_rank = static_cast<std::uint32_t>(c.peer),
                             .nonce = handshake::fresh_nonce()};
  if (options_.lend_payloads && !c.tcp) {
    c.hello.nonce_address = reinterpret_cast<std::uintptr_t>(c.hello.nonce.data());
  }
  if (!send_all(c.fd.get(), handshake::encode(c.hello))) {
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
  if (w->verdict == handshake::Verdict::wrong_version && w->cluster_version < cluster_.version()) {
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
  if (w->verdict != handshake::Verdict::ok) {
    const std::string why =
        fmt::format("{} refused our connection: {} (ours {}, theirs {})", c.address,
                    handshake::verdict_name(w->verdict), cluster_.version(), w->cluster_version);
    log(why);
    close(c.id, why);
    return;
  }
  if (!handshake::same_mac(handshake::acceptor_mac(options_.secret, c.hello, w->nonce), w->mac)) {
    const std::string why = fmt::format(
        "{} failed authentication (it holds a different secret, or we are missing one)", c.address);
    log(why);
    close(c.id, why);
    return;
  }
  if (!send_all(c.fd.get(), [&] {
        const auto mac = handshake::connector_mac(options_.secret, c.hello, w->nonce);
        return std::vector<std::byte>(mac.begin(), mac.end());
      }())) {
    close(c.id, fmt::format("handshake with {} failed: {}", c.address, net::errno_text(errno)));
    return;
  }
  c.phase = Conn::Phase::established;
  c.lend = (w->flags & handshake::kWelcomeLend) != 0;
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
    conns_.emplace(id, std::move(c));
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
  Verdict verdict = Verdict::ok;
  std::string why;
  if (h->protocol != handshake::kProtocol) {
    verdict = Verdict::wrong_protocol;
    why = fmt::format("protocol {} (ours {})", h->protocol, handshake::kProtocol);
  } else if (h->cluster_version != cluster_.version()) {
    verdict = Verdict::wrong_version;
    why = fmt::format("rank {} of cluster version {} (ours {})", h->source_rank, h->cluster_version,
                      cluster_.version());
  } else if (h->destination_rank != static_cast<std::uint32_t>(rank_) ||
             h->source_rank >= static_cast<std::uint32_t>(cluster_.size()) ||
             h->source_rank == static_cast<std::uint32_t>(rank_)) {
    verdict = Verdict::wrong_rank;
    why = fmt::format("claims rank {} -> {} (we are rank {} of {})", h->source_rank,
                      h->destination_rank, rank_, cluster_.size());
  }
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
      }
    }
  }
  if (verdict == Verdict::ok) {
    c.nonce = handshake::fresh_nonce();
    w.nonce = c.nonce;
    w.mac = handshake::acceptor_mac(options_.secret, c.hello, c.nonce);
  }
  const bool sent = send_all(c.fd.get(), handshake::encode(w));
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
  net::tune(c.fd.get(), c.tcp, c.tcp ? options_.tcp_buffer_bytes : options_.unix_buffer_bytes);
  auto& slot = inbound_[static_cast<std::size_t>(c.peer)];
  if (slot != 0 && slot != c.id) close(slot, "");  // a reconnect replaces the old stream
  slot = c.id;
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
  }
}

bool SocketTransport::read_handshake(Conn& c) {
  const ConnId id = c.id;
  while (c.hs.size() < c.hs_need) {
    const std::size_t have = c.hs.size();
    c.hs.resize(c.hs_need);
    const ssize_t n = ::recv(c.fd.get(), c.hs.data() + have, c.hs_need - have, 0);
    c.hs.resize(have + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    const std::string err = n == 0 ? "closed" : net::errno_text(errno);
    if (c.outbound) {
      // Cut before any verdict: the peer is starting, or is replacing its transport for a new
      // cluster version (elastic resize). Try again within the connect deadline; a refusal
      // proper comes as a verdict, never as this.
      const int rank = c.peer;
      const int code = n == 0 ? ECONNRESET : errno;
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

void SocketTransport::read_frames(Conn& first) {
  const ConnId id = first.id;
  std::size_t budget = kReadBudget;
  // Reads in rounds of at most 64 messages, delivering each round before the next, until the
  // socket is drained or the budget (fairness between connections) is spent.
  while (budget > 0) {
    const auto it = conns_.find(id);
    if (it == conns_.end()) return;
    Conn& c = *it->second;
    std::vector<Message> messages;
    bool drained = false;
    while (budget > 0) {
      ssize_t n;
      const auto direct = c.decoder.direct_target();
      const bool into_payload = direct.size() >= kDirectMin;
      if (into_payload) {
        n = ::recv(c.fd.get(), direct.data(), std::min(direct.size(), budget), 0);
      } else {
        n = ::recv(c.fd.get(), staging_.data(), staging_.size(), 0);
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        drained = true;
        break;
      }
      if (n <= 0) {
        const bool orderly = c.decoder.saw_bye();
        const std::string why =
            orderly ? std::string()
                    : fmt::format("connection {} {} {}", c.outbound ? "to" : "from", c.address,
                                  n == 0 ? "closed without a bye" : net::errno_text(errno));
        for (const auto ack : c.decoder.take_acks())
          lent_.erase(ack);
        if (!borrow(c, messages)) return;
        const int from = c.peer;
        deliver(from, messages);  // may close this connection: c is not used after it
        if (orderly && from >= 0) depart(from);
        close(id, why);
        return;
      }
      budget -= std::min(budget, static_cast<std::size_t>(n));
      if (into_payload) {
        c.decoder.commit(static_cast<std::size_t>(n), messages);
      } else {
        c.decoder.feed(std::span<const std::byte>(staging_.data(), static_cast<std::size_t>(n)),
                       messages);
      }
      if (c.decoder.failed() || c.decoder.saw_bye() || messages.size() >= 64) break;
    }
    const int peer = c.peer;
    for (const auto ack : c.decoder.take_acks())
      lent_.erase(ack);
    if (!borrow(c, messages)) return;
    const bool bye = c.decoder.saw_bye();
    const std::string error = c.decoder.failed() ? c.decoder.error() : std::string();
    if (c.outbound && !messages.empty()) {
      close(id, fmt::format("protocol error: data frames from {} on our outbound connection",
                            endpoint_of(peer).to_string()));
      return;
    }
    deliver(peer, messages);  // may close any connection, this one included
    if (!error.empty()) {
      ++stats_.refused;
      log(fmt::format("dropping the connection from rank {}: {}", peer, error));
      close(id, "protocol error: " + error);
      return;
    }
    if (bye) {
      depart(peer);
      close(id, "");
      return;
    }
    if (drained) return;
  }
}

bool SocketTransport::borrow(Conn& c, std::vector<Message>& messages) {
  for (const auto& ref : c.decoder.take_lent()) {
    ++stats_.borrowed;
    Payload& p = messages[ref.index].payload;
    p = Payload::remote(ref.size, std::make_shared<LentSource>(*this, c, ref.lent));
    if (handlers_.remote_payloads) continue;  // read where it is used
    if (!p.materialize()) {
      close(c.id, p.error());
      return false;
    }
  }
  return true;
}

void SocketTransport::send_ack(int rank, std::uint64_t id) {
  if (lost_[static_cast<std::size_t>(rank)] || shutting_down_) return;
  const auto it = conns_.find(outbound_[static_cast<std::size_t>(rank)]);
  if (it == conns_.end() || it->second->phase != Conn::Phase::established) {
    pending_acks_[static_cast<std::size_t>(rank)].push_back(id);
    return;
  }
  Conn& c = *it->second;
  c.out.push_back({wire::encode_ack(id), Message{}});
  if (c.out.size() == 1) flush(c);
}

void SocketTransport::enqueue(Conn& c, Message message) {
  if (c.lend && !message.payload.is_phantom() &&
      message.payload.size() >= options_.lend_min_bytes) {
    std::uint64_t id = 0;
    std::atomic<std::uint64_t>* slot = LendSlots::instance().take(&id);
    const wire::Lent lent{reinterpret_cast<std::uintptr_t>(message.payload.data()), id,
                          reinterpret_cast<std::uintptr_t>(slot)};
    auto prefix = wire::encode_lent_prefix(message, lent);
    lent_.emplace(id, LentPayload{c.peer, std::move(message.payload),  // the bytes do not move
                                  std::unique_ptr<std::atomic<std::uint64_t>, SlotRelease>(slot)});
    ++stats_.lent;
    c.out.push_back({std::move(prefix), Message{}});
    return;
  }
  auto prefix = wire::encode_prefix(message);
  c.out.push_back({std::move(prefix), std::move(message)});
}

void SocketTransport::deliver(int peer, std::vector<Message>& messages) {
  for (auto& m : messages) {
    if (lost_[static_cast<std::size_t>(peer)] || !handlers_.on_message) break;
    ++stats_.delivered;
    stats_.bytes_received += m.payload.size();
    handlers_.on_message(peer, std::move(m));
  }
  messages.clear();
}

// ---- writing ----

std::size_t SocketTransport::min_borrowed_bytes() const {
  return options_.borrow_min_bytes == 0 ? std::numeric_limits<std::size_t>::max()
                                        : options_.borrow_min_bytes;
}

void SocketTransport::reclaim(const void* lender) {
  if (lender == nullptr) return;
  const auto own = [lender](Message& m) {
    if (m.payload.lender() == lender) m.payload.own();  // same bytes: a partial write goes on
  };
  for (auto& [id, c] : conns_)
    for (auto& item : c->out)
      own(item.message);
  for (auto& queue : waiting_)
    for (auto& m : queue)
      own(m);
  // Withdrawn: the slot is cleared, so a peer reading them later fails that message.
  std::erase_if(lent_, [lender](const auto& kv) { return kv.second.payload.lender() == lender; });
}

void SocketTransport::send(int destination, Message&& message) {
  if (destination < 0 || destination >= cluster_.size()) return;
  const auto d = static_cast<std::size_t>(destination);
  if (shutting_down_ || lost_[d]) return;  // the engine has been told
  if (destination == rank_) {
    message.payload.own();  // reclaim() cannot reach it in the loop's queue
    loop_.post([this, alive = alive_, m = std::move(message)]() mutable {
      if (*alive && handlers_.on_message) handlers_.on_message(rank_, std::move(m));
    });
    return;
  }
  if (departed_[d]) {
    lose_peer(destination, "it has already shut down");
    return;
  }
  const auto it = conns_.find(outbound_[d]);
  if (it == conns_.end() || it->second->phase != Conn::Phase::established) {
    waiting_[d].push_back(std::move(message));
    return;
  }
  Conn& c = *it->second;
  enqueue(c, std::move(message));
  if (c.out.size() == 1) flush(c);
}

void SocketTransport::flush(Conn& c) {
  while (!c.out.empty()) {
    iovec iov[kMaxIov];
    int count = 0;
    std::size_t skip = c.out_offset;
    for (auto& item : c.out) {
      if (count + 2 > kMaxIov) break;
      auto add = [&](const std::byte* p, std::size_t len) {
        if (skip >= len) {
          skip -= len;
          return;
        }
        iov[count++] = iovec{const_cast<std::byte*>(p + skip), len - skip};
        skip = 0;
      };
      add(item.prefix.data(), item.prefix.size());
      if (!item.message.payload.is_phantom()) {
        add(item.message.payload.data(), item.message.payload.size());
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t n = ::sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      close(c.id, fmt::format("write to {} failed: {}", c.address, net::errno_text(errno)));
      return;
    }
    auto left = static_cast<std::size_t>(n);
    while (left > 0) {
      const std::size_t rest = c.out.front().wire_size() - c.out_offset;
      if (left < rest) {
        c.out_offset += left;
        left = 0;
      } else {
        left -= rest;
        c.out.pop_front();
        c.out_offset = 0;
      }
    }
    while (!c.out.empty() && c.out.front().wire_size() == c.out_offset) {  // empty items
      c.out.pop_front();
      c.out_offset = 0;
    }
  }
  if (c.out.empty() && shutting_down_ && !c.write_shut) {
    ::shutdown(c.fd.get(), SHUT_WR);  // our bye is out; wait for the peer's close
    c.write_shut = true;
  }
  update_interest(c);
}

void SocketTransport::update_interest(Conn& c) {
  std::uint32_t want = EPOLLIN | EPOLLRDHUP;
  if (c.phase == Conn::Phase::connecting || !c.out.empty()) want |= EPOLLOUT;
  if (want != c.interest) {
    c.interest = want;
    loop_.modify(c.watch, want);
  }
}

void SocketTransport::enqueue_bye(Conn& c) {
  c.out.push_back({wire::encode_bye(), Message{}});
  flush(c);
}

// ---- closing ----

void SocketTransport::close(ConnId id, const std::string& why) {
  const auto it = conns_.find(id);
  if (it == conns_.end()) return;
  std::unique_ptr<Conn> c = std::move(it->second);
  conns_.erase(it);
  loop_.unwatch(c->watch);
  if (c->hs_timer != 0) loop_.cancel(c->hs_timer);
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
  log(fmt::format("refused {}: {}", it->second->address, why));
  close(id, "");  // a stranger is not a peer: nothing to report to the engine
}

void SocketTransport::lose_peer(int rank, const std::string& why) {
  const auto r = static_cast<std::size_t>(rank);
  if (lost_[r]) return;
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
