// kf::Peer: the public C++ API for users' own programs in the real world. One Peer per process:
// it owns the event loop thread, the socket transport and the collective engine, and offers
// blocking calls plus async versions returning a Handle.
//
//   kf::Peer peer = kf::Peer::from_env();          // identity from kfrun / torchrun / mpirun /
//   srun std::vector<float> grad(n); kf::Status s = peer.allreduce(std::span<float>(grad),
//   kf::ReduceOp::avg);
//
// Every peer must issue the same collectives in the same order (or give them the same explicit
// names). Buffers must stay valid until the call (or the handle's wait) returns. Call from any
// thread except the peer's own loop (that is, not from inside an engine callback).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "launch/completion.h"
#include "launch/real_membership.h"
#include "launch/worker_env.h"
#include "real/socket_transport.h"
#include "runtime/buffer.h"
#include "runtime/engine.h"
#include "runtime/reduce.h"
#include "runtime/status.h"

namespace kf {

struct PeerOptions {
  EngineOptions engine;              // strategy: overridden by KUNGFU_ALLREDUCE_STRATEGY if set
  SocketTransportOptions transport;  // secret: KUNGFU_SECRET when empty; tls: KUNGFU_TLS* when null
  bool wait_for_peers = true;        // the constructor waits (bounded) until all are connected
  // While it waits, every this long a line on stderr names the peers not connected yet and their
  // hosts, and so does a last line if the connect timeout passes first (launch/startup_report.h).
  // Zero: silent. transport.connect_timeout bounds the wait (from_env: KUNGFU_CONNECT_TIMEOUT).
  Duration startup_report_every = std::chrono::seconds(5);
  Duration shutdown_limit = std::chrono::seconds(5);  // orderly close waits at most this long
  // Busy polling (from_env: KUNGFU_BUSY_POLL=1): the peer's loop never sleeps and wait() spins, so
  // a small collective costs no thread wake-up; it takes a core for the loop and one per waiting
  // caller, so use it with cores to spare (real/epoll_loop.h).
  bool busy_poll = false;
  // A waiting caller (Handle::wait) runs the peer's loop itself, as MPI's progress engine runs
  // in the caller: the operation's messages need no hand-off to the loop's thread and back, and
  // the loop's thread sleeps meanwhile (real/epoll_loop.h). It spins first as wait() would
  // (throughout, with busy_poll), then sleeps in the loop's own wait. true: every wait drives;
  // false: none. Unset: every wait in a job on one host whose workers each have a core (they do
  // not outnumber engine.host_cores); on one host with at most two workers a core, every
  // blocking call (a driver yields its core on each idle turn, as Open MPI's ranks do) but not an
  // async call's wait (DDP's buckets were slower so); across hosts, or with more workers a core,
  // only blocking calls of at most 64 KiB. There a spinning caller holds a core that other
  // workers' loops (or the kernel's TCP work) need, which costs large collectives more than it
  // saves them (docs/performance.md has the measurements). from_env: KUNGFU_CALLER_DRIVES=0 or 1.
  std::optional<bool> caller_drives;
  // How long the loop's thread and a waiting caller poll after work before they sleep
  // (EpollLoop::set_poll_before_sleep). Unset: EpollLoop::kOwnCorePollBeforeSleep where the
  // worker's host has a core for each of its workers (a sleeping peer takes longer to wake, and a
  // reply over TCP longer to come, than the default lasts), else EpollLoop::kPollBeforeSleep; a
  // waiting caller on one host polls kOwnCorePollBeforeSleep either way (the other workers of a
  // shared core take longer to run their turn). Set: the loop's thread and callers alike.
  // from_env: KUNGFU_POLL_BEFORE_SLEEP (a duration with its unit, e.g. 200us; at most 1s).
  std::optional<Duration> poll_before_sleep;
  // AUTO's allreduces of at most this many bytes go by recursive doubling (the engine's
  // auto_doubling_bytes). Unset: kBusyPollAutoDoublingBytes with busy_poll, else engine's own.
  // from_env: KUNGFU_AUTO_DOUBLING (a size, e.g. 4K; 0: never) when not set here.
  std::optional<std::size_t> auto_doubling_bytes;
  // Set: an elastic worker (from_env sets it under kfrun -w): the cluster can change at run time
  // through resize(), its connections made per cluster version by a RealMembership.
  std::optional<RealMembershipOptions> elastic;
};

// What a resize did to this worker: whether the cluster changed, and whether this worker is no
// longer in it (it should then exit; the peer has closed its connections).
struct ResizeResult {
  Status status;
  bool changed = false;
  bool detached = false;
};

class EpollLoop;

// The outcome of an async call; wait() may be called more than once and from any thread.
class Handle {
 public:
  Handle() = default;
  // spin: wait() polls instead of sleeping (the peer's busy-poll mode, PeerOptions::busy_poll).
  // loop: set, wait() runs the peer's loop on the waiting thread for a while before it sleeps
  // (PeerOptions::caller_drives); the loop must outlive every wait() that finds the call pending.
  explicit Handle(std::shared_ptr<const Completion> done, bool spin = false,
                  EpollLoop* loop = nullptr)
      : done_(std::move(done)), spin_(spin), loop_(loop) {}
  Status wait() const;
  // The status once done, or nullopt if `limit` passed first. Runs the loop meanwhile as wait()
  // does, where wait() would.
  std::optional<Status> wait_for(Duration limit) const;
  bool ready() const { return done_->ready(); }
  // Does a wait run the peer's loop (rather than wait for the loop's thread)?
  bool drives() const { return loop_ != nullptr; }

 private:
  // Both waits: until done, or until `limit` passes (unset: none).
  std::optional<Status> wait_until_done(std::optional<Duration> limit) const;
  std::shared_ptr<const Completion> done_;
  bool spin_ = false;
  EpollLoop* loop_ = nullptr;
};

template <typename T>
constexpr DType dtype_of() {
  if constexpr (std::is_same_v<T, float>) return DType::f32;
  if constexpr (std::is_same_v<T, double>) return DType::f64;
  if constexpr (std::is_same_v<T, std::int8_t>) return DType::i8;
  if constexpr (std::is_same_v<T, std::int16_t>) return DType::i16;
  if constexpr (std::is_same_v<T, std::int32_t>) return DType::i32;
  if constexpr (std::is_same_v<T, std::int64_t>) return DType::i64;
  if constexpr (std::is_same_v<T, std::uint8_t>) return DType::u8;
  if constexpr (std::is_same_v<T, std::uint16_t>) return DType::u16;
  if constexpr (std::is_same_v<T, std::uint32_t>) return DType::u32;
  if constexpr (std::is_same_v<T, std::uint64_t>) return DType::u64;
}

class Peer {
 public:
  // Reads the identity from the environment (see worker_env.h), and the start-up connect timeout
  // from KUNGFU_CONNECT_TIMEOUT when set (a flag-style duration: "30s", "2m"); throws on a bad
  // environment, naming the variable, or a port already taken.
  static Peer from_env(PeerOptions options = {});
  Peer(WorkerConfig config, PeerOptions options = {});
  ~Peer();  // pending calls complete with `cancelled`; connections close in order
  Peer(Peer&&) noexcept;
  Peer& operator=(Peer&&) noexcept;

  // Identity; after a resize, that of the new cluster (read from any thread).
  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  ClusterSpec cluster() const;
  WorkerConfig config() const;
  bool elastic() const;
  // Started by kfrun -w into a cluster that a resize grew (KUNGFU_JOINING=1): the survivors are
  // about to sync their state to it.
  bool joining() const;

  // The strategy of collectives started after this call (agreeing on it is the caller's
  // business); a resize goes back to the constructed one.
  void set_strategy(StrategyName strategy);
  // A spanning forest over this cluster's ranks (forest[i] = parent of i, a root its own parent;
  // what adaptive_strategy's STAR@r and MST switches produce), named `label` in records. Only
  // for the current cluster: a resize goes back to the last named strategy. invalid_argument
  // when the forest does not span the cluster.
  Status set_strategy_forest(std::vector<int> forest, std::string label);

  // Elastic resizes (KungFu's protocol, runtime/membership.h); every worker of the cluster calls
  // the same one at the same point, with no other call pending, and blocks until its new engine
  // is connected. resize(n): rank 0 proposes n workers to the config server (kfrun's runners
  // start or stop workers), all adopt the stored cluster. resize_from_config_server(): all adopt
  // what the config server holds, when newer (a proposal made by propose_new_size or an
  // operator). propose_new_size(n): store the proposal for n workers only, from any one worker.
  // After a change the peer is back on the strategy it was constructed with (the launcher's),
  // which is what joining workers start on. A worker not elastic gets invalid_argument.
  ResizeResult resize(int workers);
  ResizeResult resize_from_config_server();
  Status propose_new_size(int workers);

  // An empty name means "the next automatic name": every peer must then call in the same order.
  // Where every wait drives the loop (PeerOptions::caller_drives), an async call of at most
  // 64 KiB starts at the next wait on this peer, or when the loop's thread takes the loop back
  // within the last driver's linger (2 ms), whichever comes first; a larger one starts at once.
  Handle allreduce_async(ConstBufferView input, BufferView output, ReduceOp op = ReduceOp::sum,
                         std::string name = {});
  Handle broadcast_async(BufferView data, int root = 0, std::string name = {});
  Handle reduce_async(ConstBufferView input, BufferView output, ReduceOp op = ReduceOp::sum,
                      int root = 0, std::string name = {});
  Handle allgather_async(ConstBufferView input, BufferView output, std::string name = {});
  Handle gather_async(ConstBufferView input, BufferView output, int root = 0,
                      std::string name = {});
  Handle barrier_async(std::string name = {});
  // *agreed is written before the handle completes.
  Handle consensus_async(ConstBufferView bytes, std::shared_ptr<bool> agreed,
                         std::string name = {});

  // The blocking twins: each starts its call and waits for it.
  Status allreduce(ConstBufferView input, BufferView output, ReduceOp op = ReduceOp::sum,
                   std::string name = {});
  template <typename T>
  Status allreduce(std::span<T> data, ReduceOp op = ReduceOp::sum, std::string name = {}) {
    const auto v = BufferView::of(data, dtype_of<T>());
    return allreduce(v, v, op, std::move(name));
  }
  Status broadcast(BufferView data, int root = 0, std::string name = {});
  Status reduce(ConstBufferView input, BufferView output, ReduceOp op = ReduceOp::sum, int root = 0,
                std::string name = {});
  Status allgather(ConstBufferView input, BufferView output, std::string name = {});
  Status gather(ConstBufferView input, BufferView output, int root = 0, std::string name = {});
  Status barrier(std::string name = {});
  // Are `bytes` equal on every peer? Errors leave *agreed false.
  Status consensus(ConstBufferView bytes, bool* agreed, std::string name = {});

  // Versioned peer-to-peer blobs (KungFu's p2p store, the model exchange of pair averaging):
  // save() keeps a copy of `bytes` under `name`, as the next version unless one is given (the
  // last 3 versions are kept), and returns its version; request() fetches a peer's, version 0
  // meaning its latest. A peer holding no such blob completes the request with not_found.
  std::uint64_t save(const std::string& name, ConstBufferView bytes,
                     std::optional<std::uint64_t> version = std::nullopt);
  // *out is written before the handle completes.
  Handle request_async(int peer, std::string name, std::shared_ptr<Blob> out,
                       std::uint64_t version = 0);
  Status request(int peer, std::string name, Blob* out, std::uint64_t version = 0);

  // Advanced, for blocking calls made outside the blocking methods (the Python binding's, which
  // waits in slices to look at signals between them): while it lives, the calls this thread
  // starts are blocking calls moving `bytes` (SIZE_MAX: not known), whose caller waits at once
  // (Handle::wait or wait_for). Where such a call drives the loop (PeerOptions::caller_drives),
  // its start is left for that wait to run, as the blocking methods' are.
  class BlockingCall {
   public:
    explicit BlockingCall(std::size_t bytes);
    ~BlockingCall();
    BlockingCall(const BlockingCall&) = delete;
    BlockingCall& operator=(const BlockingCall&) = delete;
  };

  // Advanced: run `fn(engine)` on the peer's loop (the runtime's free functions need that).
  void post(std::function<void(Engine&)> fn);
  // Advanced: starts a call of the runtime's free functions moving `bytes` (SIZE_MAX: not known)
  // as the *_async methods start theirs (a BlockingCall on this thread applies), for a caller
  // that needs more than they offer (the Python binding tracks each call and runs callbacks on
  // it). `start(engine, done)` runs on the loop and must see that `done` is called once; the
  // handle completes with that status. If the peer has left its cluster when the loop gets to
  // it, `start` is not called and the handle completes as cancelled.
  Handle start(std::function<void(Engine&, DoneCallback)> start,
               std::size_t bytes = std::numeric_limits<std::size_t>::max());
  SocketTransportStats transport_stats() const;

 private:
  Peer(WorkerConfig config, PeerOptions options, bool joining);
  struct Impl;
  std::string next_name(const char* kind, std::string name);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kf
