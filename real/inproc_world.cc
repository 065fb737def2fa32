#include "real/inproc_world.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace kf {

// Zero copy: one payload borrowed from a sender's buffer, read by a receiver on another loop. The
// receiver reads under the lock; the sender withdraws it under the lock (reclaim), so a read never
// overlaps the buffer's reuse. The loan itself is dropped on the sender's loop only.
namespace {
struct Lend {
  std::mutex mu;
  Payload payload;  // borrowed
  bool withdrawn = false;
  bool lender_gone = false;  // withdrawn because the sender was killed (a process that died)
  int reader = -1;           // the destination
};
using Lends = std::vector<std::shared_ptr<Lend>>;  // a sender's outstanding lends, its loop only
}  // namespace

class InprocWorld::Lent final : public PayloadSource {
 public:
  Lent(std::shared_ptr<Lend> lend, EventLoop& sender, std::shared_ptr<Lends> lends)
      : lend_(std::move(lend)), sender_(sender), lends_(std::move(lends)) {}
  ~Lent() override {
    // Read: the loan goes back on the sender's loop (a stopped loop drops it with its engine
    // already gone).
    sender_.post([lend = lend_, lends = lends_] {
      std::erase(*lends, lend);
      std::lock_guard lock(lend->mu);
      lend->payload = Payload();
    });
  }
  Lent(const Lent&) = delete;
  Lent& operator=(const Lent&) = delete;

  bool read(std::size_t offset, std::byte* into, std::size_t size) override {
    std::lock_guard lock(lend_->mu);
    if (lend_->withdrawn) return false;
    std::memcpy(into, lend_->payload.data() + offset, size);
    return true;
  }
  bool verify() override {
    std::lock_guard lock(lend_->mu);
    return !lend_->withdrawn;
  }
  std::string error() const override {
    return lender_lost() ? "the sender is gone (killed while its payload was lent)"
                         : "the sender took back the payload it lent";
  }
  bool lender_lost() const override {
    std::lock_guard lock(lend_->mu);
    return lend_->lender_gone;
  }

 private:
  std::shared_ptr<Lend> lend_;
  EventLoop& sender_;
  std::shared_ptr<Lends> lends_;
};

// The transport of one peer: hands each message to the destination's loop. Posting preserves
// FIFO per (source, destination) because one loop's queue is FIFO.
class InprocWorld::Link final : public Transport {
 public:
  Link(InprocWorld& world, int rank) : world_(world), rank_(rank) {}

  void set_handlers(Handlers handlers) override { handlers_ = std::move(handlers); }
  void send(int destination, Message&& message) override {
    if (message.payload.is_borrowed()) {
      auto lend = std::make_shared<Lend>();
      const std::size_t size = message.payload.size();
      lend->payload = std::move(message.payload);
      lend->reader = destination;
      lends_->push_back(lend);
      message.payload = Payload::remote(
          size, std::make_shared<Lent>(std::move(lend), world_.loop(rank_), lends_));
    }
    world_.deliver(rank_, destination, std::move(message));
  }
  std::size_t min_borrowed_bytes() const override {
    return world_.options_.zero_copy ? 1 : Transport::min_borrowed_bytes();
  }
  std::vector<int> reclaim(const void* lender) override {
    std::vector<int> unread;
    std::erase_if(*lends_, [lender, &unread](const std::shared_ptr<Lend>& lend) {
      std::lock_guard lock(lend->mu);
      if (lend->payload.lender() != lender) return false;
      lend->withdrawn = true;
      lend->payload = Payload();
      if (std::find(unread.begin(), unread.end(), lend->reader) == unread.end())
        unread.push_back(lend->reader);
      return true;
    });
    return unread;
  }
  // The peer is killed: what it lent is gone with it, as a dead process's memory is.
  void lender_died() {
    for (const auto& lend : *lends_) {
      std::lock_guard lock(lend->mu);
      lend->withdrawn = lend->lender_gone = true;
      lend->payload = Payload();
    }
    lends_->clear();
  }
  const Handlers& handlers() const { return handlers_; }

 private:
  InprocWorld& world_;
  int rank_;
  Handlers handlers_;  // set and read on this peer's loop only
  std::shared_ptr<Lends> lends_ = std::make_shared<Lends>();
};

InprocWorld::InprocWorld(int n, EngineOptions options, InprocOptions world)
    : InprocWorld(ClusterSpec::local(n), options, world) {}

InprocWorld::InprocWorld(ClusterSpec cluster, EngineOptions options, InprocOptions world)
    : options_(world) {
  const int n = cluster.size();
  peers_.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto peer = std::make_unique<Peer>();
    peer->loop = std::make_unique<EventLoop>();
    peer->transport = std::make_unique<Link>(*this, r);
    peers_.push_back(std::move(peer));
  }
  for (int r = 0; r < n; ++r) {
    Peer& p = *peers_[static_cast<std::size_t>(r)];
    p.loop->call(
        [&] { p.engine = std::make_unique<Engine>(cluster, r, *p.loop, *p.transport, options); });
  }
}

InprocWorld::~InprocWorld() {
  for (auto& p : peers_) {
    if (p->alive.exchange(false)) p->loop->call([&] { p->engine.reset(); });
  }
  for (auto& p : peers_)
    p->loop->stop();
  peers_.clear();  // joins the loops before the engines (already gone) and links go
}

void InprocWorld::post(int rank, std::function<void(Engine&)> fn) {
  Peer& p = *peers_.at(static_cast<std::size_t>(rank));
  p.loop->post([&p, fn = std::move(fn)] {
    if (p.engine) fn(*p.engine);
  });
}

bool InprocWorld::alive(int rank) const {
  return peers_.at(static_cast<std::size_t>(rank))->alive.load();
}

void InprocWorld::kill(int rank, bool reset_connections) {
  Peer& dead = *peers_.at(static_cast<std::size_t>(rank));
  if (!dead.alive.exchange(false)) return;
  dead.loop->call([&] {
    dead.transport->lender_died();
    dead.engine.reset();
  });
  dead.loop->stop();
  if (!reset_connections) return;
  for (int r = 0; r < size(); ++r) {
    if (r == rank || !alive(r)) continue;
    Peer& p = *peers_[static_cast<std::size_t>(r)];
    p.loop->post([&p, rank] {
      if (const auto& lost = p.transport->handlers().on_peer_lost) {
        lost(rank, Status(ErrorCode::peer_lost, "connection reset"));
      }
    });
  }
}

void InprocWorld::deliver(int source, int destination, Message message) {
  messages_sent_.fetch_add(1, std::memory_order_relaxed);
  if (destination < 0 || destination >= size()) return;
  Peer& p = *peers_[static_cast<std::size_t>(destination)];
  if (!p.alive.load()) return;  // a dead peer's socket: the bytes go nowhere
  p.loop->post([&p, source, m = std::move(message)]() mutable {
    const auto& handlers = p.transport->handlers();
    if (!handlers.on_message) return;
    if (!handlers.remote_payloads && !m.payload.materialize()) return;
    handlers.on_message(source, std::move(m));
  });
}

Transport& InprocWorld::transport(int rank) {
  return *peers_.at(static_cast<std::size_t>(rank))->transport;
}

}  // namespace kf
