// InprocWorld: n peers in one process, each with its own EventLoop thread and Engine, joined by
// an in-memory transport that keeps the Transport contract (per-pair FIFO, delivery on the
// receiver's loop, loss reported as an event). The unit tests run the runtime here, and a program
// can embed a whole cluster this way.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "real/event_loop.h"
#include "runtime/engine.h"

namespace kf {

struct InprocOptions {
  // Zero copy as between processes on one host: payloads are borrowed from the sender's buffers
  // and handed over as remote payloads that the receiver reads straight from there, and the
  // sender's operation waits until they are read. Exercises the runtime's loans everywhere.
  bool zero_copy = false;
};

class InprocWorld {
 public:
  explicit InprocWorld(int n, EngineOptions options = {}, InprocOptions world = {});
  InprocWorld(ClusterSpec cluster, EngineOptions options = {}, InprocOptions world = {});
  ~InprocWorld();
  InprocWorld(const InprocWorld&) = delete;
  InprocWorld& operator=(const InprocWorld&) = delete;

  int size() const { return static_cast<int>(peers_.size()); }
  // Touch an engine only on its own loop (post / call).
  Engine& engine(int rank) { return *peers_.at(static_cast<std::size_t>(rank))->engine; }
  EventLoop& loop(int rank) { return *peers_.at(static_cast<std::size_t>(rank))->loop; }
  void post(int rank, std::function<void(Engine&)> fn);
  // The peer's transport, for a program that runs its own engine on it (a Trainer): that
  // engine takes the transport's handlers over from the world's.
  Transport& transport(int rank);

  // A crash: the peer's engine and loop stop at once and its queued messages vanish. With
  // `reset_connections`, every other peer is told the peer is lost (as a reset TCP connection
  // would); without, the peer just goes silent and only timeouts notice.
  void kill(int rank, bool reset_connections = true);
  bool alive(int rank) const;

  // Messages handed to the transport so far (all peers).
  std::uint64_t messages_sent() const { return messages_sent_.load(); }

 private:
  class Link;
  class Lent;
  struct Peer {
    std::unique_ptr<EventLoop> loop;
    std::unique_ptr<Link> transport;
    std::unique_ptr<Engine> engine;
    std::atomic<bool> alive{true};
  };

  void deliver(int source, int destination, Message message);

  InprocOptions options_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::atomic<std::uint64_t> messages_sent_{0};
};

}  // namespace kf
