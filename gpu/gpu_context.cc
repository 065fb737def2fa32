// CudaGpuContext: one peer's GPU state and the three device allreduce paths.
//
// Threads: everything runs on the engine's executor (the peer's event loop) except
// ncclCommInitRank, which blocks until every member of the group has called it and so runs on a
// helper thread of its own; its outcome is posted back. Communicators are built one at a time, in
// the order they are first asked for (the same on every rank, since device collectives are
// started in the same order everywhere), so no two ranks can wait on each other's different
// inits.
//
// NCCL work is queued on one stream per communicator (collectives on a communicator must be
// issued in the same order on every rank; one stream keeps their execution in that order too),
// and waited for by polling an event from the executor, also checking ncclCommGetAsyncError and a
// deadline: a peer that died or hangs aborts the communicator and fails the operation with an
// error naming the call and the communicator, instead of hanging.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>
#include <utility>

#include "gpu/cuda_device.h"
#include "gpu/gpu.h"
#include "gpu/hierarchical_allreduce.h"
#include "gpu/nccl_comm.h"
#include "gpu/reduce_kernels.h"
#include "real/event_loop.h"
#include "runtime/collectives.h"
#include "topology/strategy.h"

namespace kf {

bool gpu_built_with_cuda() {
  return true;
}

std::optional<std::string> gpu_unavailable() {
  int n = 0;
  if (Status s = gpu::CudaDevice::count(&n); !s.ok()) return s.message();
  return std::nullopt;
}

int gpu_device_count() {
  int n = 0;
  return gpu::CudaDevice::count(&n).ok() ? n : 0;
}

int gpu_default_device(int local_rank) {
  const int n = gpu_device_count();
  return n > 0 ? std::max(local_rank, 0) % n : 0;
}

Status gpu_stream_synchronize(int device, std::uintptr_t stream) {
  if (const cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
    return Status(ErrorCode::device,
                  fmt::format("cudaSetDevice({}): {}", device, cudaGetErrorString(e)));
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the caller hands over a stream handle's bits
  const auto handle = reinterpret_cast<cudaStream_t>(stream);
  if (const cudaError_t e = cudaStreamSynchronize(handle); e != cudaSuccess)
    return Status(ErrorCode::device,
                  fmt::format("cudaStreamSynchronize: {}", cudaGetErrorString(e)));
  return {};
}

namespace gpu {
namespace {

// Who the communicators were built for; another key (a resize) means rebuilding them.
struct ClusterKey {
  std::uint64_t version = 0;
  int size = 0;
  int rank = -1;
  bool operator==(const ClusterKey&) const = default;
};

ClusterKey key_of(const Engine& e) {
  return {e.cluster().version(), e.size(), e.rank()};
}

// Members of this rank's group (global ranks, ascending) and how to name the group.
struct GroupSpec {
  std::string label;          // "global", "local", "forest-<hash>"
  std::vector<int> members;   // ascending; members[0] makes the unique id
  bool by_broadcast = false;  // the global group: the id goes by broadcast from rank 0
  // Build an NCCL communicator even for a group of one (the global group: so that NCCL on one GPU
  // measures ncclAllReduce, as nccl-tests does); other groups of one just copy.
  bool nccl_alone = false;
};

GroupSpec global_group(const Engine& e) {
  GroupSpec g{.label = "global", .by_broadcast = true, .nccl_alone = true};
  for (int r = 0; r < e.size(); ++r)
    g.members.push_back(r);
  return g;
}

GroupSpec local_group(const Engine& e) {
  GroupSpec g{.label = "local"};
  const auto host_of = e.cluster().host_of();
  for (int r = 0; r < e.size(); ++r)
    if (host_of[static_cast<std::size_t>(r)] == host_of[static_cast<std::size_t>(e.rank())])
      g.members.push_back(r);
  return g;
}

int tree_root(const std::vector<int>& forest, int r) {
  for (std::size_t hops = 0; hops <= forest.size(); ++hops) {
    const int p = forest[static_cast<std::size_t>(r)];
    if (p == r) return r;
    r = p;
  }
  return -1;  // a cycle: rejected before
}

std::string forest_label(const std::vector<int>& forest) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the parents
  for (int p : forest) {
    h ^= static_cast<std::uint64_t>(static_cast<std::uint32_t>(p));
    h *= 1099511628211ull;
  }
  return fmt::format("forest-{:016x}", h);
}

std::optional<std::string> forest_problem(const std::vector<int>& forest, int n) {
  if (static_cast<int>(forest.size()) != n)
    return fmt::format("forest has {} nodes, the cluster has {} workers", forest.size(), n);
  for (int r = 0; r < n; ++r) {
    const int p = forest[static_cast<std::size_t>(r)];
    if (p < 0 || p >= n) return fmt::format("forest[{}] = {} is not a rank", r, p);
    if (tree_root(forest, r) < 0) return fmt::format("forest has a cycle through rank {}", r);
  }
  return std::nullopt;
}

// Waits for the NCCL work queued on one group's stream. Work on a stream finishes in the order it
// was queued, so only the oldest unfinished operation's event is polled: one query per poll
// however many operations wait (a training step without fusion queues one allreduce per tensor,
// 161 for ResNet-50, where polling each would query all 161 events per pass). While work is
// outstanding it also watches the communicator for asynchronous errors and the oldest operation's
// deadline: either aborts the communicator and fails everything queued, so no peer hangs.
class StreamWatch : public std::enable_shared_from_this<StreamWatch> {
 public:
  StreamWatch(int ordinal, std::weak_ptr<NcclComm> comm, std::string where,
              std::weak_ptr<bool> alive, Executor& executor)
      : ordinal_(ordinal),
        comm_(std::move(comm)),
        where_(std::move(where)),
        alive_(std::move(alive)),
        executor_(executor) {}

  // `done` once everything queued on `stream` so far has finished (or failed).
  Status add(cudaStream_t stream, Duration timeout, std::function<void(Status)> done) {
    if (Status s = cuda_status(cudaSetDevice(ordinal_), "cudaSetDevice", where_); !s.ok()) return s;
    cudaEvent_t event = nullptr;
    if (Status s = cuda_status(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                               "cudaEventCreateWithFlags", where_);
        !s.ok())
      return s;
    if (Status s = cuda_status(cudaEventRecord(event, stream), "cudaEventRecord", where_);
        !s.ok()) {
      (void)cudaEventDestroy(event);
      return s;
    }
    queue_.push_back({event, executor_.now() + timeout, timeout, std::move(done)});
    if (!polling_) {
      polling_ = true;
      polls_ = 0;
      delay_ = Duration::zero();
      executor_.post([self = shared_from_this()] { self->run(); });
    }
    return Status{};
  }

 private:
  struct Entry {
    cudaEvent_t event;
    TimePoint deadline;
    Duration timeout;
    std::function<void(Status)> done;
  };

  void run() {
    if (alive_.expired()) return;  // the context shut down: nothing is called back
    (void)cudaSetDevice(ordinal_);
    while (!queue_.empty()) {
      const cudaError_t e = cudaEventQuery(queue_.front().event);
      if (e == cudaErrorNotReady) break;
      Entry entry = std::move(queue_.front());
      queue_.pop_front();
      (void)cudaEventDestroy(entry.event);
      polls_ = 0;
      delay_ = Duration::zero();
      entry.done(cuda_status(e, "cudaEventQuery (waiting for NCCL)", where_));
      if (alive_.expired()) return;  // a callback may shut the context down
    }
    if (queue_.empty()) {
      polling_ = false;
      return;
    }
    const std::shared_ptr<NcclComm> comm = comm_.lock();
    if (!comm) {
      return fail_all(
          Status(ErrorCode::cancelled,
                 fmt::format("{} was dropped (the cluster changed) with work queued", where_)));
    }
    if (Status s = comm->async_error(); !s.ok()) {
      comm->abort();
      return fail_all(s);
    }
    if (executor_.now() >= queue_.front().deadline) {
      const Duration timeout = queue_.front().timeout;
      comm->abort();
      return fail_all(Status(ErrorCode::timeout,
                             fmt::format("NCCL work on {} did not finish within {} s (aborted)",
                                         where_, to_seconds(timeout))));
    }
    auto self = shared_from_this();
    if (++polls_ < 64) {
      executor_.post([self] { self->run(); });
    } else {
      delay_ = std::min<Duration>(std::max<Duration>(delay_ * 2, std::chrono::microseconds(5)),
                                  std::chrono::microseconds(200));
      executor_.post_after(delay_, [self] { self->run(); });
    }
  }

  void fail_all(const Status& s) {
    auto queue = std::move(queue_);
    queue_.clear();
    polling_ = false;
    for (auto& entry : queue) {
      (void)cudaEventDestroy(entry.event);
      entry.done(s);
    }
  }

  int ordinal_;
  std::weak_ptr<NcclComm> comm_;
  std::string where_;
  std::weak_ptr<bool> alive_;
  Executor& executor_;
  std::deque<Entry> queue_;
  bool polling_ = false;
  int polls_ = 0;
  Duration delay_{0};
};

class CudaGpuContext final : public GpuContext {
 public:
  CudaGpuContext(std::unique_ptr<CudaDevice> device, GpuOptions options)
      : device_(std::move(device)), options_(std::move(options)) {
    if (Status s = DeviceStaging::create(*device_, &staging_); !s.ok())
      throw std::runtime_error(s.to_string());
    staging_->piece_bytes = options_.piece_bytes;
  }
  ~CudaGpuContext() override { shutdown(); }

  Device& device() override { return *device_; }
  const GpuOptions& options() const override { return options_; }
  void set_strategy(DeviceStrategy strategy) override { options_.strategy = strategy; }

  void allreduce(Engine& engine, DeviceAllreduceOptions o, DoneCallback done) override;
  void subset_allreduce(Engine& engine, DeviceAllreduceOptions o, std::vector<int> forest,
                        DoneCallback done) override;
  void prepare(Engine& engine, DevicePath path, DoneCallback done) override;
  std::vector<std::string> communicators() const override;
  void shutdown() override;

 private:
  struct Group {
    enum class State { building, ready, failed } state = State::building;
    GroupSpec spec;
    Status error;
    std::shared_ptr<NcclComm> comm;  // null for a group of one (no NCCL needed)
    std::unique_ptr<DeviceStream> stream;
    std::shared_ptr<StreamWatch> watch;  // made on first use, when there is a comm
    PhaseSequencer sequencer;
    std::deque<std::function<void(std::shared_ptr<Group>, Status)>> waiters;
  };
  using Ready = std::function<void(std::shared_ptr<Group> group, Status status)>;

  // Calls `then` (on the executor) once `spec`'s communicator is built, or failed.
  void with_group(Engine& engine, GroupSpec spec, Ready then);
  void start_next_build(Engine& engine);
  void exchanged(Engine& engine, Group& g, const ncclUniqueId& id);
  // `generation`: the cluster generation the build began in (a stale one is dropped).
  void built(std::uint64_t generation, const std::string& label, Status s, ncclComm_t comm);
  void check_cluster(const Engine& engine);

  // Waits for everything queued on `group`'s stream, watching its communicator.
  Status watch(Group& g, Executor& executor, Duration timeout, std::function<void(Status)> done);
  Duration timeout_of(const Engine& e, Duration t) const {
    if (t > Duration::zero()) return t;
    if (options_.timeout > Duration::zero()) return options_.timeout;
    return e.options().timeout;
  }

  void nccl_allreduce(Engine& engine, DeviceAllreduceOptions o, DoneCallback done);
  // One ncclAllReduce over `group` (a copy when it has no communicator; u16/i16 by allgather and
  // a fold in rank order), waited for by watch().
  void allreduce_in_group(Group& group, Engine& engine, const DeviceAllreduceOptions& o,
                          Duration timeout, DoneCallback done);
  void hierarchical_allreduce(Engine& engine, DeviceAllreduceOptions o, DoneCallback done);
  void staged(Engine& engine, DeviceAllreduceOptions o, DoneCallback done);

  std::unique_ptr<CudaDevice> device_;
  GpuOptions options_;
  std::unique_ptr<DeviceStaging> staging_;
  ClusterKey key_;
  std::map<std::string, std::shared_ptr<Group>> groups_;
  std::deque<std::string> build_queue_;  // labels waiting for their turn; front = building
  bool exchanging_ = false;
  std::uint64_t generation_ = 0;  // bumped whenever the communicators are dropped
  Engine* engine_ = nullptr;      // the engine of the latest request (builds run on it)
  std::shared_ptr<const CompiledStrategy> host_strategy_;
  EventLoop init_thread_;  // ncclCommInitRank blocks: it runs here
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

// ---- communicators ------------------------------------------------------------------------------

void CudaGpuContext::check_cluster(const Engine& engine) {
  const ClusterKey k = key_of(engine);
  if (k == key_) return;
  // A resize (or the first use): peers may be gone, so abort rather than finalize.
  for (auto& [label, g] : groups_) {
    if (g->comm) g->comm->abort();
    for (auto& w : g->waiters)
      w(nullptr, Status(ErrorCode::cancelled, "the cluster changed while building " + label));
  }
  groups_.clear();
  build_queue_.clear();
  exchanging_ = false;
  ++generation_;
  host_strategy_.reset();
  key_ = k;
}

void CudaGpuContext::with_group(Engine& engine, GroupSpec spec, Ready then) {
  check_cluster(engine);
  engine_ = &engine;
  auto it = groups_.find(spec.label);
  if (it != groups_.end()) {
    Group& g = *it->second;
    if (g.state == Group::State::ready) return then(it->second, Status{});
    if (g.state == Group::State::failed) return then(nullptr, g.error);
    g.waiters.push_back(std::move(then));
    return;
  }
  auto g = std::make_shared<Group>();
  g->spec = std::move(spec);
  g->waiters.push_back(std::move(then));
  const std::string label = g->spec.label;
  if (Status s = device_->create_stream(&g->stream); !s.ok()) {
    g->state = Group::State::failed;
    g->error = s;
  }
  Group& ref = *g;
  groups_.emplace(label, g);
  if (ref.state == Group::State::failed) {
    auto waiters = std::move(ref.waiters);
    for (auto& w : waiters)
      w(nullptr, ref.error);
    return;
  }
  build_queue_.push_back(label);
  start_next_build(engine);
}

void CudaGpuContext::start_next_build(Engine& engine) {
  if (exchanging_ || build_queue_.empty()) return;
  Group& g = *groups_.at(build_queue_.front());
  exchanging_ = true;
  const auto& members = g.spec.members;
  const int me = engine.rank();
  const bool leader = !members.empty() && members.front() == me;
  auto id = std::make_shared<ncclUniqueId>();
  std::memset(id.get(), 0, sizeof *id);
  if (leader && (members.size() > 1 || g.spec.nccl_alone)) {
    if (Status s = nccl_status(ncclGetUniqueId(id.get()), "ncclGetUniqueId",
                               fmt::format("{} group on rank {}", g.spec.label, me));
        !s.ok()) {
      // Still take part in the exchange (peers would wait); the build fails afterwards.
      g.error = s;
    }
  }
  const std::string name = fmt::format("kf.nccl/v{}/{}", key_.version, g.spec.label);
  std::weak_ptr<bool> alive = alive_;
  Engine* e = &engine;
  const std::string label = g.spec.label;
  const std::uint64_t gen = generation_;
  if (g.spec.by_broadcast) {
    auto bytes = std::make_shared<std::vector<std::byte>>(sizeof(ncclUniqueId));
    std::memcpy(bytes->data(), id.get(), sizeof(ncclUniqueId));
    const BufferView view(bytes->data(), bytes->size(), DType::u8);
    broadcast(engine, {.name = name, .input = view, .output = view, .root = 0},
              [this, alive, e, bytes, label, gen](Status s) {
                if (alive.expired() || gen != generation_) return;  // the cluster changed
                auto it = groups_.find(label);
                if (it == groups_.end()) return;
                if (!s.ok()) return built(gen, label, s, nullptr);
                ncclUniqueId got;
                std::memcpy(&got, bytes->data(), sizeof got);
                exchanged(*e, *it->second, got);
              });
  } else {
    // Every rank sends 128 bytes: each group's first rank its fresh id, the others zeros; a
    // member takes its first rank's.
    const std::size_t n = static_cast<std::size_t>(engine.size());
    auto mine = std::make_shared<std::vector<std::byte>>(sizeof(ncclUniqueId));
    std::memcpy(mine->data(), id.get(), sizeof(ncclUniqueId));
    auto all = std::make_shared<std::vector<std::byte>>(n * sizeof(ncclUniqueId));
    const int first = members.empty() ? me : members.front();
    allgather(engine,
              {.name = name,
               .input = ConstBufferView(mine->data(), mine->size(), DType::u8),
               .output = BufferView(all->data(), all->size(), DType::u8)},
              [this, alive, e, mine, all, label, first, gen](Status s) {
                if (alive.expired() || gen != generation_) return;
                auto it = groups_.find(label);
                if (it == groups_.end()) return;
                if (!s.ok()) return built(gen, label, s, nullptr);
                ncclUniqueId got;
                std::memcpy(&got, all->data() + static_cast<std::size_t>(first) * sizeof got,
                            sizeof got);
                exchanged(*e, *it->second, got);
              });
  }
}

void CudaGpuContext::exchanged(Engine& engine, Group& g, const ncclUniqueId& id) {
  const auto& members = g.spec.members;
  const auto pos = std::find(members.begin(), members.end(), engine.rank());
  const int rank = static_cast<int>(pos - members.begin());
  const int nranks = static_cast<int>(members.size());
  const std::string label = g.spec.label;
  const std::uint64_t gen = generation_;
  if (!g.error.ok()) return built(gen, label, g.error, nullptr);
  if (nranks <= 1 && !g.spec.nccl_alone) {
    return built(gen, label, Status{}, nullptr);  // alone: copies, no NCCL
  }
  const int ordinal = device_->ordinal();
  const std::string where =
      fmt::format("{} communicator on rank {} (cuda:{})", label, engine.rank(), ordinal);
  std::weak_ptr<bool> alive = alive_;
  Executor* executor = &engine.executor();
  init_thread_.post([this, alive, executor, id, nranks, rank, ordinal, where, label, gen] {
    ncclComm_t comm = nullptr;
    Status s = init_nccl_comm(ordinal, id, nranks, rank, where, &comm);
    executor->post([this, alive, s, comm, label, gen] {
      if (alive.expired()) {
        if (comm != nullptr) (void)ncclCommAbort(comm);
        return;
      }
      built(gen, label, s, comm);
    });
  });
}

void CudaGpuContext::built(std::uint64_t generation, const std::string& label, Status s,
                           ncclComm_t comm) {
  if (generation != generation_) {  // built for a cluster that is gone
    if (comm != nullptr) (void)ncclCommAbort(comm);
    return;
  }
  exchanging_ = false;
  if (!build_queue_.empty() && build_queue_.front() == label) build_queue_.pop_front();
  auto it = groups_.find(label);
  if (it == groups_.end()) {  // dropped by a resize meanwhile
    if (comm != nullptr) (void)ncclCommAbort(comm);
    return;
  }
  Group& g = *it->second;
  if (s.ok()) {
    if (comm != nullptr) {
      auto pos = std::find(g.spec.members.begin(), g.spec.members.end(), key_.rank);
      g.comm = std::make_shared<NcclComm>(comm, device_->ordinal(), label, g.spec.members,
                                          static_cast<int>(pos - g.spec.members.begin()));
    }
    g.state = Group::State::ready;
  } else {
    g.state = Group::State::failed;
    g.error = s;
  }
  auto waiters = std::move(g.waiters);
  g.waiters.clear();
  std::shared_ptr<Group> ready = g.state == Group::State::ready ? it->second : nullptr;
  for (auto& w : waiters)
    w(ready, g.error);
  // The next queued group, on the engine that asked for it (the current one: a resize clears the
  // queue).
  if (!build_queue_.empty() && engine_ != nullptr) start_next_build(*engine_);
}

Status CudaGpuContext::watch(Group& g, Executor& executor, Duration timeout,
                             std::function<void(Status)> done) {
  if (!g.comm) return device_->notify(*g.stream, executor, std::move(done));
  if (!g.watch) {
    g.watch = std::make_shared<StreamWatch>(device_->ordinal(), g.comm, g.comm->where(), alive_,
                                            executor);
  }
  return g.watch->add(native(*g.stream), timeout, std::move(done));
}

std::vector<std::string> CudaGpuContext::communicators() const {
  std::vector<std::string> out;
  for (const auto& [label, g] : groups_) {
    if (g->state != Group::State::ready) continue;
    out.push_back(fmt::format("{}({} ranks{})", label, g->spec.members.size(),
                              g->comm ? "" : ", no NCCL needed"));
  }
  return out;
}

void CudaGpuContext::shutdown() {
  alive_ = std::make_shared<bool>(true);  // late callbacks of the old generation do nothing
  for (auto& [label, g] : groups_) {
    if (g->stream) (void)device_->synchronize(*g->stream);
    g->comm.reset();  // finalize + destroy
    g->stream.reset();
  }
  groups_.clear();
  build_queue_.clear();
  exchanging_ = false;
  ++generation_;
  staging_.reset();
}

// ---- the allreduce paths ------------------------------------------------------------------------

void CudaGpuContext::allreduce(Engine& engine, DeviceAllreduceOptions o, DoneCallback done) {
  if (!staging_) {
    engine.reject(std::move(done),
                  Status(ErrorCode::cancelled,
                         fmt::format("allreduce '{}' on rank {}: the GPU context is shut down",
                                     o.name, engine.rank())));
    return;
  }
  if (!reduce_op_supports(o.op, o.dtype) || (o.count > 0 && (!o.input || !o.output))) {
    engine.reject(
        std::move(done),
        Status(ErrorCode::invalid_argument,
               fmt::format("allreduce '{}' on rank {}: {}", o.name, engine.rank(),
                           o.count > 0 && (!o.input || !o.output)
                               ? std::string("null device buffer")
                               : fmt::format("{} needs a floating dtype, not {}",
                                             reduce_op_name(o.op), dtype_name(o.dtype)))));
    return;
  }
  switch (options_.strategy.path) {
    case DevicePath::nccl:
      return nccl_allreduce(engine, std::move(o), std::move(done));
    case DevicePath::nccl_hierarchical:
      // NCCL has no 16-bit integers: those take the staged path.
      if (!nccl_dtype(o.dtype)) return staged(engine, std::move(o), std::move(done));
      return hierarchical_allreduce(engine, std::move(o), std::move(done));
    case DevicePath::staged:
      return staged(engine, std::move(o), std::move(done));
  }
}

void CudaGpuContext::nccl_allreduce(Engine& engine, DeviceAllreduceOptions o, DoneCallback done) {
  const Duration timeout = timeout_of(engine, o.timeout);
  Engine* e = &engine;
  with_group(
      engine, global_group(engine),
      [this, e, o, timeout, done = std::move(done)](std::shared_ptr<Group> g, Status s) mutable {
        if (!s.ok() || !g) {
          e->reject(std::move(done), device_op_error("allreduce", o.name, e->rank(), s));
          return;
        }
        allreduce_in_group(*g, *e, o, timeout, std::move(done));
      });
}

void CudaGpuContext::allreduce_in_group(Group& group, Engine& engine,
                                        const DeviceAllreduceOptions& o, Duration timeout,
                                        DoneCallback done) {
  Group* g = &group;
  Engine* e = &engine;
  const std::size_t elem = dtype_size(o.dtype);
  const std::size_t bytes = o.count * elem;
  std::byte* scratch = nullptr;
  Status q = device_->bind();
  if (q.ok() && (!g->comm || (g->comm->size() == 1 && !nccl_dtype(o.dtype)))) {
    if (o.output != o.input)
      q = device_->copy(o.output, o.input, bytes, CopyKind::device_to_device, *g->stream);
  } else if (q.ok() && nccl_dtype(o.dtype)) {
    q = nccl_status(ncclAllReduce(o.input, o.output, o.count, *nccl_dtype(o.dtype), nccl_op(o.op),
                                  g->comm->get(), native(*g->stream)),
                    fmt::format("ncclAllReduce({} x {}, {})", o.count, dtype_name(o.dtype),
                                reduce_op_name(o.op)),
                    g->comm->where(), g->comm->get());
  } else if (q.ok()) {
    // u16 / i16: gather every rank's buffer, then fold them in rank order on the device.
    const int n = g->comm->size();
    void* p = nullptr;
    q = device_->allocate(bytes * static_cast<std::size_t>(n), &p);
    scratch = static_cast<std::byte*>(p);
    if (q.ok()) {
      q = nccl_status(
          ncclAllGather(o.input, scratch, bytes, ncclUint8, g->comm->get(), native(*g->stream)),
          fmt::format("ncclAllGather({} bytes)", bytes), g->comm->where(), g->comm->get());
    }
    if (q.ok()) {
      q = cuda_status(
          gpu::launch_reduce_to(o.output, scratch, scratch + bytes, o.count, o.dtype, o.op,
                                native(*g->stream), device_->info().multiprocessors),
          "reduce kernel (allgathered)", device_->where());
    }
    for (int r = 2; q.ok() && r < n; ++r) {
      q = device_->reduce(o.output, scratch + static_cast<std::size_t>(r) * bytes, o.count, o.dtype,
                          o.op, *g->stream);
    }
  }
  auto finish = std::make_shared<std::function<void(Status)>>(
      [this, e, scratch, name = o.name, done = std::move(done)](Status st) mutable {
        if (scratch != nullptr) device_->release(scratch);
        e->reject(std::move(done),
                  st.ok() ? st : device_op_error("allreduce", name, e->rank(), st));
      });
  if (q.ok()) {
    q = watch(*g, e->executor(), timeout, [finish](Status st) { (*finish)(std::move(st)); });
    if (q.ok()) return;
  }
  (void)device_->synchronize(*g->stream);  // nothing may still use the scratch
  (*finish)(q);
}

void CudaGpuContext::hierarchical_allreduce(Engine& engine, DeviceAllreduceOptions o,
                                            DoneCallback done) {
  const Duration timeout = timeout_of(engine, o.timeout);
  Engine* e = &engine;
  with_group(
      engine, local_group(engine),
      [this, e, o, timeout, done = std::move(done)](std::shared_ptr<Group> g, Status s) mutable {
        if (!s.ok() || !g) {
          e->reject(std::move(done), device_op_error("allreduce", o.name, e->rank(), s));
          return;
        }
        const std::vector<int> masters = host_masters(e->cluster().host_of());
        if (masters.size() <= 1) {
          // One host: reduce + broadcast inside it is an allreduce on the local communicator,
          // issued whole (no pieces: nothing is staged through the host).
          allreduce_in_group(*g, *e, o, timeout, std::move(done));
          return;
        }
        const HostGroup host{.device = device_.get(),
                             .comm = g->comm.get(),
                             .stream = g->stream.get(),
                             .sequencer = &g->sequencer,
                             .master = g->spec.members.front() == e->rank()};
        auto wait = [this, g, timeout](DeviceStream&, Executor& ex,
                                       std::function<void(Status)> then) {
          return watch(*g, ex, timeout, std::move(then));
        };
        run_device_pipeline(*e, *staging_,
                            hierarchical_pipeline(host, o, masters, e->size(), options_.piece_bytes,
                                                  timeout, std::move(wait)),
                            std::move(done));
      });
}

void CudaGpuContext::staged(Engine& engine, DeviceAllreduceOptions o, DoneCallback done) {
  check_cluster(engine);
  if (options_.strategy.host_strategy && !host_strategy_) {
    host_strategy_ =
        engine.compile(make_strategy(*options_.strategy.host_strategy, engine.cluster().host_of()));
  }
  staged_allreduce(engine, *staging_, std::move(o),
                   options_.strategy.host_strategy ? host_strategy_ : nullptr, std::move(done));
}

void CudaGpuContext::subset_allreduce(Engine& engine, DeviceAllreduceOptions o,
                                      std::vector<int> forest, DoneCallback done) {
  if (auto problem = forest_problem(forest, engine.size())) {
    engine.reject(std::move(done), Status(ErrorCode::invalid_argument,
                                          fmt::format("subset_allreduce '{}' on rank {}: {}",
                                                      o.name, engine.rank(), *problem)));
    return;
  }
  if (!staging_ || !reduce_op_supports(o.op, o.dtype) || !nccl_dtype(o.dtype)) {
    engine.reject(
        std::move(done),
        Status(!staging_ ? ErrorCode::cancelled : ErrorCode::invalid_argument,
               fmt::format("subset_allreduce '{}' on rank {}: {}", o.name, engine.rank(),
                           !staging_ ? "the GPU context is shut down"
                                     : fmt::format("{} on {} is not supported on NCCL",
                                                   reduce_op_name(o.op), dtype_name(o.dtype)))));
    return;
  }
  GroupSpec spec{.label = forest_label(forest)};
  const int root = tree_root(forest, engine.rank());
  for (int r = 0; r < engine.size(); ++r)
    if (tree_root(forest, r) == root) spec.members.push_back(r);
  const Duration timeout = timeout_of(engine, o.timeout);
  Engine* e = &engine;
  with_group(
      engine, std::move(spec),
      [this, e, o, timeout, done = std::move(done)](std::shared_ptr<Group> g, Status s) mutable {
        Status q = s.ok() && g ? device_->bind() : s;
        if (q.ok() && !g->comm) {
          if (o.output != o.input)
            q = device_->copy(o.output, o.input, o.count * dtype_size(o.dtype),
                              CopyKind::device_to_device, *g->stream);
        } else if (q.ok()) {
          q = nccl_status(ncclAllReduce(o.input, o.output, o.count, *nccl_dtype(o.dtype),
                                        nccl_op(o.op), g->comm->get(), native(*g->stream)),
                          fmt::format("ncclAllReduce({} x {}, {})", o.count, dtype_name(o.dtype),
                                      reduce_op_name(o.op)),
                          g->comm->where(), g->comm->get());
        }
        auto shared = std::make_shared<DoneCallback>(std::move(done));
        if (q.ok()) {
          q = watch(*g, e->executor(), timeout, [e, shared, name = o.name](Status st) {
            e->reject(std::move(*shared),
                      st.ok() ? st : device_op_error("subset_allreduce", name, e->rank(), st));
          });
          if (q.ok()) return;
        }
        e->reject(std::move(*shared), device_op_error("subset_allreduce", o.name, e->rank(), q));
      });
}

void CudaGpuContext::prepare(Engine& engine, DevicePath path, DoneCallback done) {
  if (path == DevicePath::staged) {
    engine.reject(std::move(done), Status{});
    return;
  }
  Engine* e = &engine;
  with_group(engine, path == DevicePath::nccl ? global_group(engine) : local_group(engine),
             [e, done = std::move(done)](std::shared_ptr<Group>, Status s) mutable {
               e->reject(std::move(done), s);
             });
}

}  // namespace
}  // namespace gpu

std::unique_ptr<GpuContext> GpuContext::open(int device, GpuOptions options) {
  std::unique_ptr<gpu::CudaDevice> d;
  if (Status s = gpu::CudaDevice::open(device, &d); !s.ok()) throw std::runtime_error(s.message());
  return std::make_unique<gpu::CudaGpuContext>(std::move(d), std::move(options));
}

}  // namespace kf
