#include "transport/real/inproc_world.h"

#include <fmt/format.h>

namespace kf {

// The transport of one peer: hands each message to the destination's loop. Posting preserves
// FIFO per (source, destination) because one loop's queue is FIFO.
class InprocWorld::Link final : public Transport {
 public:
  Link(InprocWorld& world, int rank) : world_(world), rank_(rank) {}

  void set_handlers(Handlers handlers) override { handlers_ = std::move(handlers); }
  void send(int destination, Message message) override {
    world_.deliver(rank_, destination, std::move(message));
  }
  const Handlers& handlers() const { return handlers_; }

 private:
  InprocWorld& world_;
  int rank_;
  Handlers handlers_;  // set and read on this peer's loop only
};

InprocWorld::InprocWorld(int n, EngineOptions options)
    : InprocWorld(ClusterSpec::local(n), options) {}

InprocWorld::InprocWorld(ClusterSpec cluster, EngineOptions options) {
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
  dead.loop->call([&] { dead.engine.reset(); });
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
    if (const auto& on_message = p.transport->handlers().on_message) {
      on_message(source, std::move(m));
    }
  });
}

Transport& InprocWorld::transport(int rank) {
  return *peers_.at(static_cast<std::size_t>(rank))->transport;
}

}  // namespace kf
