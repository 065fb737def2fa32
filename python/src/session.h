// The process's one runtime for the Python bindings: a kf::Peer made by init() (its identity from
// kfrun, torchrun, mpirun or srun, as a C++ worker's), the async collectives started through it
// as Operations and the blocking ones as kf::Handles, and the completion thread the Operations'
// callbacks run on. Every extension module of the process reaches the same Session through
// libkungfu_runtime.so. Plain C++: the modules hold the Python objects, this holds the runtime.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "python/src/operation.h"
#include "runtime/buffer.h"
#include "runtime/p2p_store.h"
#include "runtime/reduce.h"
#include "runtime/status.h"
#include "topology/strategy.h"

namespace kf {
class Peer;
class GpuContext;
class Handle;
}  // namespace kf

namespace kf::python {

struct SessionOptions {
  Duration timeout = std::chrono::seconds(30);  // deadline of every collective
  std::optional<StrategyName> strategy;         // unset: KUNGFU_ALLREDUCE_STRATEGY or AUTO
  std::string device_strategy = "NCCL";         // CUDA memory's path (parse_device_strategy)
};

class Session {
 public:
  // Starts the process's runtime; a second call with the runtime up does nothing. Throws
  // std::runtime_error naming the problem (a bad environment, a port in use).
  static void init(const SessionOptions& options);
  // Stops it: pending operations complete as cancelled, connections close in order.
  static void shutdown();
  static bool initialized();
  // Waits up to `limit` for `h`, a blocking call started through this session (start_blocking_*),
  // running the loop meanwhile where that call drives: its status, or nullopt when `limit` passed
  // first, and at once when the session is gone or closing (closing()). Until it is done, the
  // call may still use its buffers.
  static std::optional<Status> wait_for(const Handle& h, Duration limit);
  // No session is up, or it is closing: waits return at once.
  static bool closing();
  // Throws std::logic_error("kungfu is not initialized: call kungfu.init() first") before init().
  static Session& get();

  ~Session();

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  std::string strategy() const;
  // The named strategy in use, or the one a forest replaced (what a resize goes back to).
  std::string named_strategy() const;
  // Collectives started after this call use `strategy` (agreeing on it is the caller's business).
  void set_strategy(StrategyName strategy);
  // A forest over the current cluster's ranks, called `label` by strategy() (kf::Peer's).
  Status set_strategy_forest(std::vector<int> forest, std::string label);
  // The host index of every rank, hosts numbered by first appearance.
  std::vector<int> host_of() const;
  const std::shared_ptr<CompletionQueue>& completions() const { return completions_; }

  // Elastic resizes (kf::Peer::resize, or resize_from_config_server when `workers` is unset):
  // every worker calls the same one at the same point, with nothing pending; blocking. After a
  // change automatic names restart, as a joining worker's do; a detached worker's later calls
  // fail as cancelled.
  struct Resized {
    Status status;
    bool changed = false;
    bool detached = false;
  };
  Resized resize(std::optional<int> workers);
  Status propose_new_size(int workers);
  bool elastic() const;
  bool joining() const;
  bool detached() const;

  // Collectives. An empty name is the next automatic one (every peer must then call in the same
  // order). Buffers must stay valid until the operation completes.
  OperationPtr allreduce(ConstBufferView input, BufferView output, ReduceOp op, std::string name);
  OperationPtr broadcast(BufferView data, int root, std::string name);
  OperationPtr reduce(ConstBufferView input, BufferView output, ReduceOp op, int root,
                      std::string name);
  OperationPtr allgather(ConstBufferView input, BufferView output, std::string name);
  OperationPtr gather(ConstBufferView input, BufferView output, int root, std::string name);
  OperationPtr barrier(std::string name);
  // *agreed is written before the operation completes: are `bytes` the same on every peer?
  OperationPtr consensus(ConstBufferView bytes, std::shared_ptr<bool> agreed, std::string name);
  // Blocking calls, for a caller that waits for each at once (wait_for): kf::Peer's own
  // blocking path (Peer::BlockingCall), whose wait runs the loop where a C++ caller's blocking
  // call of the same size would. No Operation tracks them: a closing session ends their waits
  // (wait_for), and the peer it closes cancels what is still pending.
  Handle start_blocking_allreduce(ConstBufferView input, BufferView output, ReduceOp op,
                                  std::string name);
  Handle start_blocking_broadcast(BufferView data, int root, std::string name);
  Handle start_blocking_reduce(ConstBufferView input, BufferView output, ReduceOp op, int root,
                               std::string name);
  Handle start_blocking_allgather(ConstBufferView input, BufferView output, std::string name);
  Handle start_blocking_gather(ConstBufferView input, BufferView output, int root,
                               std::string name);
  Handle start_blocking_barrier(std::string name);
  Handle start_blocking_consensus(ConstBufferView bytes, std::shared_ptr<bool> agreed,
                                  std::string name);
  // An allreduce of CUDA memory on `device` through the GPU paths (kf::GpuContext, its strategy
  // SessionOptions::device_strategy), after the work queued on `stream` (the producer's CUDA
  // stream, 0 the legacy default) is done. The device context opens on first use; one device per
  // process. Without a usable device the operation fails with the reason (ErrorCode::device).
  OperationPtr device_allreduce(const void* input, void* output, std::size_t count, DType dtype,
                                ReduceOp op, int device, std::uintptr_t stream, std::string name);
  // The peer-to-peer store: a copy of `bytes` kept under `name` as its next version (returned);
  // a peer's blob (version 0: its latest) into *out before the operation completes, not_found
  // when the peer holds none.
  std::uint64_t save(const std::string& name, ConstBufferView bytes);
  OperationPtr request(int peer, const std::string& name, std::uint64_t version,
                       std::shared_ptr<Blob> out);

 private:
  explicit Session(const SessionOptions& options);
  std::string name_for(const char* kind, std::string name);
  // Starts `start`, moving `bytes` (kf::Peer::start), as a tracked operation; refuses it at once
  // when shutting down.
  template <typename Start>
  OperationPtr launch(const char* kind, const std::string& name, std::size_t bytes, Start start);
  void finish(const OperationPtr& op, Status status);

  // Opens the GPU context for `device` on first use; the reason when it cannot.
  Status open_gpu(int device);

  std::unique_ptr<Peer> peer_;
  std::string device_strategy_;
  std::mutex gpu_mu_;
  std::unique_ptr<GpuContext> gpu_;  // used on the loop only, once opened
  int gpu_device_ = -1;
  StrategyName strategy_ = StrategyName::automatic;
  StrategyName configured_ = StrategyName::automatic;  // init's: what a resize goes back to
  std::string forest_label_;                           // set while a forest is the strategy
  std::shared_ptr<CompletionQueue> completions_;
  mutable std::mutex mu_;
  std::uint64_t serial_ = 0;
  std::set<OperationPtr> pending_;  // started, not complete
  bool closing_ = false;
  bool detached_ = false;
  int driving_ = 0;  // threads waiting in wait_for
  std::condition_variable drivers_gone_;
};

}  // namespace kf::python
