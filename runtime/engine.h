// Engine: one peer's collective runtime. Event-driven and single-threaded: everything runs on the
// peer's Executor, which is a real event loop or the simulator. It owns the in-flight operations,
// matches arriving messages to them by (name, source, chunk, step), keeps messages that arrive
// before their operation starts in a mailbox, arms a timeout on every operation, and turns a lost
// peer into an error on every pending operation.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/chunking.h"
#include "runtime/cluster_spec.h"
#include "runtime/executor.h"
#include "runtime/operation.h"
#include "runtime/p2p_store.h"
#include "runtime/peer_bytes.h"
#include "runtime/routes.h"
#include "runtime/transport.h"

namespace kf {

struct EngineOptions {
  std::size_t chunk_bytes = kDefaultChunkBytes;  // collectives travel in pieces of this size
  Duration timeout = std::chrono::seconds(30);   // default deadline of every operation
  StrategyName strategy = StrategyName::automatic;
  // AUTO across hosts (Algorithm::by_size): an allreduce goes round a ring (RING_RS_AG_BIDIR) when
  // its buffer divided by the cluster's size is at least this many bytes, else over the graphs. The
  // ring sends 2(n - 1) parts of buffer / n one after another, the trees 2 x depth whole chunks:
  // the ring pays off once a part's transfer outweighs a step's latency. Like chunk_bytes, every
  // peer must use the same value.
  std::size_t auto_ring_part_bytes = kDefaultAutoRingPartBytes;
  // ... and the same on one host, where a step costs less, while every worker has a core of its
  // own: where the workers outnumber host_cores, auto_ring_part_bytes holds on one host too. Every
  // peer must use the same value.
  std::size_t auto_local_ring_part_bytes = kDefaultAutoLocalRingPartBytes;
  // The cores of the host, when the workers share one (the peer sets it from the workers'
  // affinity mask, kf::usable_cores; every worker on a host must see the same count). 0: unknown,
  // taken as a core per worker (simulations).
  int host_cores = 0;
  // AUTO: an allreduce of at most this many bytes goes by recursive doubling (log2 n steps, each
  // partner pair swapping the whole buffer at once), on one host or across hosts; 0: never. Every
  // peer must use the same value.
  std::size_t auto_doubling_bytes = kDefaultAutoDoublingBytes;
  // ... and between exactly two ranks, up to the larger of that and this: recursive doubling is
  // then one simultaneous exchange of the two messages the trees send one after the other. 0:
  // only auto_doubling_bytes counts. Every peer must use the same value.
  std::size_t auto_pair_doubling_bytes = kDefaultAutoPairDoublingBytes;
  // AUTO among a power of two of at least 4 ranks, each on a host of its own: an allreduce the
  // ring would take (above) goes by HALVING_DOUBLING instead while it has at most this many bytes;
  // 0: never. Every peer must use the same value.
  std::size_t auto_halving_doubling_bytes = kDefaultAutoHalvingDoublingBytes;
  // A remote payload (read from a same-host peer on demand) that arrives before its operation
  // starts waits in the mailbox as it is for this long, then is copied out so the peer gets its
  // buffer back.
  Duration remote_hold = std::chrono::milliseconds(20);
};

class Engine {
 public:
  // Construct, use and destroy on `executor`. `transport` must outlive the engine.
  Engine(ClusterSpec cluster, int rank, Executor& executor, Transport& transport,
         EngineOptions options = {});
  ~Engine();  // pending operations complete with `cancelled`, synchronously
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool spans_hosts() const { return spans_hosts_; }  // workers on more than one host
  const ClusterSpec& cluster() const { return cluster_; }
  Executor& executor() const { return executor_; }
  const EngineOptions& options() const { return options_; }

  // The strategy new collectives use. Swapping it affects only operations started afterwards;
  // agreeing on the swap across peers (barrier + consensus) is the caller's business.
  std::shared_ptr<const CompiledStrategy> strategy() const { return strategy_; }
  void set_strategy(Strategy strategy);
  void set_strategy(std::shared_ptr<const Strategy> strategy);
  std::shared_ptr<const CompiledStrategy> compile(Strategy strategy) const;
  std::shared_ptr<const CompiledStrategy> compile(std::shared_ptr<const Strategy> strategy) const;
  // The first pair of the current strategy re-rooted at `root`, for rooted operations.
  std::shared_ptr<const CompiledStrategy> rooted(int root);
  // `strategy` run over its own graphs (reduce up its trees, broadcast down): what a strategy of
  // another algorithm does with a buffer too small for that algorithm. Cached for the current one.
  std::shared_ptr<const CompiledStrategy> over_graphs(
      const std::shared_ptr<const CompiledStrategy>& strategy);
  // `strategy` run round a ring over its own ranks: a by_size strategy's large allreduces. Across
  // hosts RING_RS_AG_BIDIR (each pair's connection carries data both ways), on one host
  // RING_RS_AG. Cached for the current one.
  std::shared_ptr<const CompiledStrategy> over_ring(
      const std::shared_ptr<const CompiledStrategy>& strategy);

  BlobStore& blobs() { return blobs_; }
  std::uint64_t next_request_id() { return ++request_ids_; }

  // Starts `op`; it completes exactly once through its callback, which is posted on the executor
  // (never called from inside start()), unless it is a StatusSlot, which is filled in place. A
  // name already in flight is an invalid_argument error.
  void start(std::unique_ptr<Operation> op);
  // Completes a callback with `status` without starting anything (argument errors); it is posted,
  // or filled in place if a StatusSlot, as above.
  void reject(DoneCallback done, Status status);
  void send(int destination, Message&& message);
  // `data` as a payload of `op`: borrowed when the transport takes borrowed payloads that big
  // (op then completes only once the transport gives it back), copied otherwise.
  Payload payload_of(Operation& op, ConstBufferView data);

  // Bytes this peer sent to / received from each rank (payloads), for monitoring.
  const PeerValues<std::uint64_t>& egress_bytes() const { return egress_bytes_.totals(); }
  const PeerValues<std::uint64_t>& ingress_bytes() const { return ingress_bytes_.totals(); }
  // Messages from an older cluster version, dropped on arrival.
  std::uint64_t stale_messages() const { return stale_messages_; }
  // Messages received into an operation's buffer (Payload::placed) after it had ended, dropped.
  std::uint64_t late_placed_messages() const { return late_placed_messages_; }

  // Elastic membership: messages that arrived from a newer cluster version (a peer that switched
  // first), for the engine that replaces this one; it takes them with deliver().
  std::vector<std::pair<int, Message>> take_newer_messages() { return std::move(newer_); }
  void deliver(int source, Message message) { on_message(source, std::move(message)); }

  std::size_t in_flight() const { return active_.size() + lending_.size(); }
  std::size_t mailbox_size() const;
  // "rank 2 (127.0.0.1:10002)"
  std::string describe_peer(int rank) const;

 private:
  struct Stashed {
    int source;
    Message message;
    TimePoint at;  // when it was stashed
  };
  // In-flight operations by name; the key views the operation's own name, which lives as long as
  // the entry.
  using Active = std::unordered_map<std::string_view, std::unique_ptr<Operation>>;
  // Messages that arrived before their operation started, by name, in arrival order. Looked up
  // by a view, so that a message's name is not copied to find its queue.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const noexcept {
      return std::hash<std::string_view>{}(name);
    }
  };
  using Mailbox = std::unordered_map<std::string, std::deque<Stashed>, NameHash, std::equal_to<>>;

  std::shared_ptr<const CompiledStrategy> with_algorithm(
      const std::shared_ptr<const CompiledStrategy>& strategy, Algorithm algorithm,
      std::shared_ptr<const CompiledStrategy>& cached);

  void on_message(int source, Message&& message);
  // Transport::Handlers::landing: the landing of the active operation that accepts `header` now.
  Landing landing(int source, const MessageHeader& header, std::size_t payload_bytes);
  Operation* find_active(std::string_view name);  // in active_, or null
  void on_peer_lost(int peer, Status why);
  void on_p2p_request(int source, Message request);
  void deliver_stashed(Operation& op);
  void settle(const std::string& name);  // completes `name` if its operation is done
  void retire(Active::iterator it);      // takes an entry out of active_, keeping its node
  void fail(const std::string& name, Status status);
  // Completes `op`: at once, or once the transport has given back what it borrowed from it.
  void complete(std::unique_ptr<Operation> op, Status status);
  void returned(std::uint64_t serial);      // a lending operation got everything back
  std::vector<int> reclaim(Operation& op);  // takes back at once what the transport still borrows
  void arm_hold_timer();
  void materialize_held();  // copies out remote payloads stashed for remote_hold

  // What every message reads, together at the front (at a thousand simulated workers each cache
  // line a message touches is a trip to memory). version_ and size_ copy the cluster's, which
  // never changes under an engine.
  //
  // The operation the last message was for: the next message is most likely for it too, and a
  // hash lookup costs a thousand-engine simulation two cache misses per message. Cleared when
  // that operation leaves active_.
  Operation* last_found_ = nullptr;
  Transport& transport_;
  std::uint64_t version_;
  int size_;
  bool spans_hosts_;
  int rank_;
  PeerBytes egress_bytes_;
  PeerBytes ingress_bytes_;

  ClusterSpec cluster_;
  Executor& executor_;
  EngineOptions options_;
  std::shared_ptr<const CompiledStrategy> strategy_;
  std::map<int, std::shared_ptr<const CompiledStrategy>> rooted_;
  std::shared_ptr<const CompiledStrategy> over_graphs_;  // of strategy_
  std::shared_ptr<const CompiledStrategy> over_ring_;    // of strategy_

  Active active_;
  // Done, waiting for the transport to give back borrowed pieces of their buffers; by serial.
  struct Lending {
    std::unique_ptr<Operation> op;
    Status status;  // what it completes with
  };
  std::map<std::uint64_t, Lending> lending_;
  Mailbox mailbox_;
  // A steady run starts and completes an operation, and often stashes a message that arrived
  // before its operation, every step: the nodes of active_ and mailbox_ (a mailbox entry's queue
  // keeps its blocks) are kept for the next ones, up to kSpareNodes of each, instead of going back
  // to the allocator.
  static constexpr std::size_t kSpareNodes = 16;
  std::vector<Active::node_type> spare_active_;
  std::vector<Mailbox::node_type> spare_mailbox_;
  std::map<int, Status> lost_peers_;
  std::uint64_t stale_messages_ = 0;
  std::uint64_t late_placed_messages_ = 0;
  std::vector<std::pair<int, Message>> newer_;
  BlobStore blobs_;
  std::uint64_t serials_ = 0;
  std::uint64_t request_ids_ = 0;
  Executor::TimerId hold_timer_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // guards posted wake-ups
};

}  // namespace kf
