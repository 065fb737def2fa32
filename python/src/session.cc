#include "python/src/session.h"

#include <fmt/format.h>

#include <future>
#include <limits>
#include <stdexcept>
#include <utility>

#include "gpu/gpu.h"
#include "launch/peer.h"
#include "runtime/collectives.h"

namespace kf::python {

namespace {

std::mutex g_mu;
std::unique_ptr<Session> g_session;

// A call's size where it is not known (kf::Peer::start): started at once.
constexpr std::size_t kUnknownBytes = std::numeric_limits<std::size_t>::max();

}  // namespace

void Session::init(const SessionOptions& options) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_session) return;
  g_session.reset(new Session(options));
}

void Session::shutdown() {
  std::unique_ptr<Session> s;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    s = std::move(g_session);
  }
  s.reset();
}

bool Session::initialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_session != nullptr;
}

std::optional<Status> Session::wait_for(const Handle& h, Duration limit) {
  if (h.ready()) return h.wait();
  Session* s;
  {
    // Counted under g_mu, before shutdown() can take the session away: ~Session waits for it.
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_session) return std::nullopt;
    s = g_session.get();
    std::lock_guard<std::mutex> session_lock(s->mu_);
    if (s->closing_) return std::nullopt;
    ++s->driving_;
  }
  struct Leave {
    Session& s;
    ~Leave() {
      std::lock_guard<std::mutex> lock(s.mu_);
      if (--s.driving_ == 0) s.drivers_gone_.notify_all();
    }
  } leave{*s};
  return h.wait_for(limit);
}

bool Session::closing() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_session) return true;
  std::lock_guard<std::mutex> session_lock(g_session->mu_);
  return g_session->closing_;
}

Session& Session::get() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_session) throw std::logic_error("kungfu is not initialized: call kungfu.init() first");
  return *g_session;
}

Session::Session(const SessionOptions& options)
    : device_strategy_(options.device_strategy), completions_(std::make_shared<CompletionQueue>()) {
  if (!parse_device_strategy(device_strategy_)) {
    throw std::invalid_argument(fmt::format("kungfu.init: unknown device strategy '{}' (known: {})",
                                            device_strategy_, device_strategy_names()));
  }
  PeerOptions p;
  p.engine.timeout = options.timeout;
  try {
    peer_ = std::make_unique<Peer>(Peer::from_env(p));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("kungfu.init: {}", e.what()));
  }
  // An explicit strategy wins over the launcher's (Peer took KUNGFU_ALLREDUCE_STRATEGY).
  strategy_ = options.strategy.value_or(peer_->config().strategy.value_or(StrategyName::automatic));
  configured_ = strategy_;
  if (options.strategy) peer_->set_strategy(*options.strategy);
}

Session::~Session() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    closing_ = true;
    drivers_gone_.wait(lock, [this] { return driving_ == 0; });
  }
  if (gpu_) {  // the context's communicators and streams go on the loop, where they were used
    std::promise<void> gone;
    GpuContext* gpu = gpu_.get();
    peer_->post([gpu, &gone](Engine&) {
      gpu->shutdown();
      gone.set_value();
    });
    gone.get_future().wait();
    gpu_.reset();
  }
  peer_.reset();  // started operations complete (cancelled when still pending)
  std::set<OperationPtr> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(pending_);
  }
  // Operations posted but never started by the loop: they will not be.
  for (const auto& op : left)
    op->complete(Status(ErrorCode::cancelled, op->what() + ": kungfu shut down"));
  completions_->stop();
}

int Session::rank() const {
  return peer_->rank();
}
int Session::size() const {
  return peer_->size();
}
int Session::local_rank() const {
  return peer_->local_rank();
}
int Session::local_size() const {
  return peer_->local_size();
}

std::string Session::strategy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return forest_label_.empty() ? std::string(strategy_name(strategy_)) : forest_label_;
}

std::string Session::named_strategy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::string(strategy_name(strategy_));
}

Status Session::set_strategy_forest(std::vector<int> forest, std::string label) {
  Status s = peer_->set_strategy_forest(std::move(forest), label);
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    forest_label_ = std::move(label);
  }
  return s;
}

std::vector<int> Session::host_of() const {
  return peer_->cluster().host_of();
}

void Session::set_strategy(StrategyName strategy) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    strategy_ = strategy;
    forest_label_.clear();
  }
  peer_->set_strategy(strategy);
}

Session::Resized Session::resize(std::optional<int> workers) {
  const ResizeResult r = workers ? peer_->resize(*workers) : peer_->resize_from_config_server();
  std::lock_guard<std::mutex> lock(mu_);
  if (r.changed && !r.detached) {
    // Back on init's strategy, as joining workers start (their script's init is the same), ahead
    // of any collective of the new cluster.
    serial_ = 0;
    strategy_ = configured_;
    forest_label_.clear();
    peer_->set_strategy(configured_);
  }
  if (r.detached) detached_ = true;
  return {.status = r.status, .changed = r.changed, .detached = r.detached};
}

Status Session::propose_new_size(int workers) {
  return peer_->propose_new_size(workers);
}

bool Session::elastic() const {
  return peer_->elastic();
}
bool Session::joining() const {
  return peer_->joining();
}
bool Session::detached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return detached_;
}

std::string Session::name_for(const char* kind, std::string name) {
  if (!name.empty()) return name;
  std::lock_guard<std::mutex> lock(mu_);
  return fmt::format("kf.py.{}.{}", kind, ++serial_);
}

void Session::finish(const OperationPtr& op, Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(op);
  }
  op->complete(std::move(status));
}

template <typename Start>
OperationPtr Session::launch(const char* kind, const std::string& name, std::size_t bytes,
                             Start start) {
  auto op = std::make_shared<Operation>(fmt::format("{} '{}'", kind, name), completions_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closing_) {
      pending_.insert(op);
    } else {
      op->complete(Status(ErrorCode::cancelled, op->what() + ": kungfu is shutting down"));
      return op;
    }
  }
  // The operation completes before the handle does, so a waiter that finds the handle done
  // finds the operation done.
  op->set_handle(peer_->start(
      [this, op, start = std::move(start)](Engine& e, DoneCallback done) {
        start(e, [this, op, done = std::move(done)](Status s) {
          finish(op, s);
          done(std::move(s));
        });
      },
      bytes));
  return op;
}

Handle Session::start_blocking_allreduce(ConstBufferView input, BufferView output, ReduceOp op,
                                         std::string name) {
  name = name_for("allreduce", std::move(name));
  const Peer::BlockingCall blocking(input.size_bytes());
  return peer_->allreduce_async(input, output, op, std::move(name));
}

Handle Session::start_blocking_broadcast(BufferView data, int root, std::string name) {
  name = name_for("broadcast", std::move(name));
  const Peer::BlockingCall blocking(data.size_bytes());
  return peer_->broadcast_async(data, root, std::move(name));
}

Handle Session::start_blocking_reduce(ConstBufferView input, BufferView output, ReduceOp op,
                                      int root, std::string name) {
  name = name_for("reduce", std::move(name));
  const Peer::BlockingCall blocking(input.size_bytes());
  return peer_->reduce_async(input, output, op, root, std::move(name));
}

Handle Session::start_blocking_allgather(ConstBufferView input, BufferView output,
                                         std::string name) {
  name = name_for("allgather", std::move(name));
  const Peer::BlockingCall blocking(output.size_bytes());
  return peer_->allgather_async(input, output, std::move(name));
}

Handle Session::start_blocking_gather(ConstBufferView input, BufferView output, int root,
                                      std::string name) {
  name = name_for("gather", std::move(name));
  const Peer::BlockingCall blocking(std::max(input.size_bytes(), output.size_bytes()));
  return peer_->gather_async(input, output, root, std::move(name));
}

Handle Session::start_blocking_consensus(ConstBufferView bytes, std::shared_ptr<bool> agreed,
                                         std::string name) {
  name = name_for("consensus", std::move(name));
  const Peer::BlockingCall blocking(bytes.size_bytes());
  return peer_->consensus_async(bytes, std::move(agreed), std::move(name));
}

Handle Session::start_blocking_barrier(std::string name) {
  name = name_for("barrier", std::move(name));
  const Peer::BlockingCall blocking(0);
  return peer_->barrier_async(std::move(name));
}

OperationPtr Session::allreduce(ConstBufferView input, BufferView output, ReduceOp op,
                                std::string name) {
  name = name_for("allreduce", std::move(name));
  return launch("allreduce", name, input.size_bytes(), [=](Engine& e, DoneCallback done) {
    kf::allreduce(e, {.name = name, .input = input, .output = output, .op = op}, std::move(done));
  });
}

OperationPtr Session::broadcast(BufferView data, int root, std::string name) {
  name = name_for("broadcast", std::move(name));
  return launch("broadcast", name, data.size_bytes(), [=](Engine& e, DoneCallback done) {
    kf::broadcast(e, {.name = name, .input = data, .output = data, .root = root}, std::move(done));
  });
}

OperationPtr Session::reduce(ConstBufferView input, BufferView output, ReduceOp op, int root,
                             std::string name) {
  name = name_for("reduce", std::move(name));
  return launch("reduce", name, input.size_bytes(), [=](Engine& e, DoneCallback done) {
    kf::reduce(e, {.name = name, .input = input, .output = output, .op = op, .root = root},
               std::move(done));
  });
}

OperationPtr Session::allgather(ConstBufferView input, BufferView output, std::string name) {
  name = name_for("allgather", std::move(name));
  return launch("allgather", name, output.size_bytes(), [=](Engine& e, DoneCallback done) {
    kf::allgather(e, {.name = name, .input = input, .output = output}, std::move(done));
  });
}

OperationPtr Session::gather(ConstBufferView input, BufferView output, int root, std::string name) {
  name = name_for("gather", std::move(name));
  return launch("gather", name, std::max(input.size_bytes(), output.size_bytes()),
                [=](Engine& e, DoneCallback done) {
                  kf::gather(e, {.name = name, .input = input, .output = output, .root = root},
                             std::move(done));
                });
}

OperationPtr Session::barrier(std::string name) {
  name = name_for("barrier", std::move(name));
  return launch("barrier", name, 0,
                [=](Engine& e, DoneCallback done) { kf::barrier(e, name, std::move(done)); });
}

OperationPtr Session::consensus(ConstBufferView bytes, std::shared_ptr<bool> agreed,
                                std::string name) {
  name = name_for("consensus", std::move(name));
  return launch("consensus", name, bytes.size_bytes(), [=](Engine& e, DoneCallback done) {
    kf::consensus(e, name, bytes, [agreed, done = std::move(done)](Status s, bool ok) {
      if (agreed) *agreed = s.ok() && ok;
      done(std::move(s));
    });
  });
}

Status Session::open_gpu(int device) {
  std::lock_guard<std::mutex> lock(gpu_mu_);
  if (gpu_) {
    if (device == gpu_device_) return {};
    return Status(ErrorCode::invalid_argument,
                  fmt::format("CUDA memory on device {} after device {}: one device per process",
                              device, gpu_device_));
  }
  try {
    GpuOptions o{.device = device, .strategy = *parse_device_strategy(device_strategy_)};
    gpu_ = GpuContext::open(device, o);
    gpu_device_ = device;
  } catch (const std::exception& e) {
    return Status(ErrorCode::device, e.what());
  }
  return {};
}

OperationPtr Session::device_allreduce(const void* input, void* output, std::size_t count,
                                       DType dtype, ReduceOp op, int device, std::uintptr_t stream,
                                       std::string name) {
  name = name_for("allreduce", std::move(name));
  Status ready = open_gpu(device);
  if (ready.ok()) ready = gpu_stream_synchronize(device, stream);
  if (!ready.ok()) {
    auto failed = std::make_shared<Operation>(fmt::format("allreduce '{}'", name), completions_);
    failed->complete(
        Status(ready.code(), fmt::format("allreduce '{}' of CUDA memory on rank {}: {}", name,
                                         rank(), ready.message())));
    return failed;
  }
  GpuContext* gpu = gpu_.get();
  return launch("allreduce", name, kUnknownBytes, [=](Engine& e, DoneCallback done) {
    gpu->allreduce(
        e,
        {.name = name, .input = input, .output = output, .count = count, .dtype = dtype, .op = op},
        std::move(done));
  });
}

std::uint64_t Session::save(const std::string& name, ConstBufferView bytes) {
  return peer_->save(name, bytes);
}

OperationPtr Session::request(int peer, const std::string& name, std::uint64_t version,
                              std::shared_ptr<Blob> out) {
  return launch("request", name, kUnknownBytes, [=](Engine& e, DoneCallback done) {
    kf::request_blob(e, {.peer = peer, .name = name, .version = version},
                     [out, done = std::move(done)](Status s, Blob blob) {
                       *out = std::move(blob);
                       done(std::move(s));
                     });
  });
}

}  // namespace kf::python
