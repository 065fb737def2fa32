#include "runtime/device_collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <utility>
#include <vector>

#include "runtime/collectives.h"

namespace kf {

// ---- PinnedPool ---------------------------------------------------------------------------------

PinnedPool::~PinnedPool() {
  for (auto& b : blocks_)
    device_.release_pinned(b.data);
}

Status PinnedPool::acquire(std::size_t bytes, void** out) {
  *out = nullptr;
  const std::size_t want = std::bit_ceil(std::max<std::size_t>(bytes, std::size_t{64} << 10));
  for (auto& b : blocks_) {
    if (!b.in_use && b.bytes == want) {
      b.in_use = true;
      *out = b.data;
      return Status{};
    }
  }
  void* p = nullptr;
  if (Status s = device_.allocate_pinned(want, &p); !s.ok()) return s;
  blocks_.push_back({p, want, true});
  *out = p;
  return Status{};
}

void PinnedPool::give_back(void* p) {
  for (auto& b : blocks_) {
    if (b.data == p) {
      b.in_use = false;
      return;
    }
  }
}

std::size_t PinnedPool::held_bytes() const {
  std::size_t n = 0;
  for (const auto& b : blocks_)
    n += b.bytes;
  return n;
}

// ---- names --------------------------------------------------------------------------------------

namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<DeviceStrategy> parse_device_strategy(std::string_view name) {
  const std::string u = upper(name);
  if (u == "NCCL") return DeviceStrategy{.path = DevicePath::nccl};
  if (u == "NCCL_HIERARCHICAL") return DeviceStrategy{.path = DevicePath::nccl_hierarchical};
  if (u == "STAGED") return DeviceStrategy{.path = DevicePath::staged};
  std::string_view host = u;
  if (u.starts_with("STAGED:")) host = std::string_view(u).substr(7);
  if (const auto s = parse_strategy_name(host))
    return DeviceStrategy{.path = DevicePath::staged, .host_strategy = *s};
  return std::nullopt;
}

std::string device_strategy_name(const DeviceStrategy& s) {
  switch (s.path) {
    case DevicePath::nccl:
      return "NCCL";
    case DevicePath::nccl_hierarchical:
      return "NCCL_HIERARCHICAL";
    case DevicePath::staged:
      return s.host_strategy ? "STAGED:" + std::string(strategy_name(*s.host_strategy)) : "STAGED";
  }
  return "?";
}

std::string device_strategy_names() {
  std::string out = "NCCL, NCCL_HIERARCHICAL, STAGED, STAGED:<S> or a runtime strategy S (";
  bool first = true;
  for (StrategyName s : kAllStrategyNames) {
    if (!first) out += ", ";
    out += strategy_name(s);
    first = false;
  }
  return out + ")";
}

Status device_op_error(std::string_view kind, const std::string& name, int rank,
                       const Status& cause) {
  return Status(cause.code(),
                fmt::format("{} '{}' on rank {}: {}", kind, name, rank, cause.message()));
}

// ---- PhaseSequencer -----------------------------------------------------------------------------

void PhaseSequencer::ready(std::uint64_t ticket, std::function<void()> phase) {
  waiting_.emplace(ticket, std::move(phase));
  while (!waiting_.empty() && waiting_.begin()->first == next_run_) {
    auto fn = std::move(waiting_.begin()->second);
    waiting_.erase(waiting_.begin());
    ++next_run_;
    fn();
  }
}

// ---- DeviceStaging ------------------------------------------------------------------------------

Status DeviceStaging::create(Device& device, std::unique_ptr<DeviceStaging>* out) {
  std::unique_ptr<DeviceStaging> s(new DeviceStaging(device));
  if (Status st = device.create_stream(&s->down_); !st.ok()) return st;
  if (Status st = device.create_stream(&s->up_); !st.ok()) return st;
  *out = std::move(s);
  return Status{};
}

DeviceStaging::~DeviceStaging() {
  // Nothing may still be copying into the pool's memory when it goes.
  if (down_) (void)device_.synchronize(*down_);
  if (up_) (void)device_.synchronize(*up_);
}

// ---- the pipeline -------------------------------------------------------------------------------

namespace {

struct PipelineState : std::enable_shared_from_this<PipelineState> {
  Engine* engine = nullptr;
  DeviceStaging* staging = nullptr;
  DevicePipeline p;
  DoneCallback done;
  std::byte* host = nullptr;  // pinned staging, when p.stage
  std::size_t elem = 0;
  std::size_t piece_count = 0;  // elements per piece
  std::size_t pieces = 0;
  std::size_t finished = 0;
  Status error;
  PhaseSequencer own_sequencer;  // when the pipeline shares none

  std::size_t first(std::size_t i) const { return i * piece_count; }
  std::size_t count(std::size_t i) const { return std::min(piece_count, p.op.count - first(i)); }
  void fail(const Status& s) {
    if (!s.ok() && error.ok()) error = device_op_error(p.kind, p.op.name, engine->rank(), s);
  }
  Device& device() { return staging->device(); }
  Status wait_for(DeviceStream& stream, std::function<void(Status)> then) {
    if (p.notify) return p.notify(stream, engine->executor(), std::move(then));
    return device().notify(stream, engine->executor(), std::move(then));
  }

  // Every piece's device phase and copy down, queued at once.
  void start() {
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::uint64_t ticket = p.sequencer->take();
      Status s;
      if (p.before) s = p.before(first(i), count(i), *p.down);
      if (s.ok() && p.stage) {
        const void* from = p.stage_from_output ? p.op.output : p.op.input;
        s = device().copy(host + first(i) * elem,
                          static_cast<const std::byte*>(from) + first(i) * elem, count(i) * elem,
                          CopyKind::device_to_host, *p.down);
      }
      if (s.ok()) {
        auto self = shared_from_this();
        s = wait_for(*p.down, [self, i, ticket](Status st) { self->landed(i, ticket, st); });
      }
      if (!s.ok()) {
        fail(s);
        // Still take part in the host collective, so peers are not left waiting.
        auto self = shared_from_this();
        engine->executor().post([self, i, ticket] { self->landed(i, ticket, Status{}); });
      }
    }
  }

  void landed(std::size_t i, std::uint64_t ticket, Status s) {
    fail(s);
    const BufferView view = p.stage ? BufferView(host + first(i) * elem, count(i), p.op.dtype)
                                    : BufferView::phantom(count(i), p.op.dtype);
    auto self = shared_from_this();
    p.host_collective(*engine, fmt::format("{}#{}", p.op.name, i), view,
                      [self, i, ticket](Status st) {
                        if (!st.ok() && self->error.ok()) self->error = st;  // names itself
                        self->p.sequencer->ready(ticket, [self, i] { self->back(i); });
                      });
  }

  // In ticket order: the piece goes back to the device and through its last device phase.
  void back(std::size_t i) {
    Status s;
    if (p.stage) {
      s = device().copy(static_cast<std::byte*>(p.op.output) + first(i) * elem,
                        host + first(i) * elem, count(i) * elem, CopyKind::host_to_device, *p.up);
    }
    if (s.ok() && p.after) s = p.after(first(i), count(i), *p.up);
    if (s.ok()) {
      auto self = shared_from_this();
      s = wait_for(*p.up, [self](Status st) { self->piece_done(st); });
    }
    if (!s.ok()) {
      fail(s);
      // The stream may still hold this piece's copy: wait for it before the staging goes back.
      const Status synced = device().synchronize(*p.up);
      fail(synced);
      auto self = shared_from_this();
      engine->executor().post([self] { self->piece_done(Status{}); });
    }
  }

  void piece_done(Status s) {
    fail(s);
    if (++finished < pieces) return;
    if (host != nullptr) staging->pool().give_back(host);
    host = nullptr;
    auto d = std::move(done);
    d(error);
  }
};

}  // namespace

void run_device_pipeline(Engine& engine, DeviceStaging& staging, DevicePipeline pipeline,
                         DoneCallback done) {
  const auto& o = pipeline.op;
  std::optional<std::string> problem;
  if (!reduce_op_supports(o.op, o.dtype)) {
    problem =
        fmt::format("{} needs a floating dtype, not {}", reduce_op_name(o.op), dtype_name(o.dtype));
  } else if (o.count > 0 && (o.input == nullptr || o.output == nullptr)) {
    problem = "null device buffer";
  } else if (!pipeline.host_collective) {
    problem = "no host collective";
  }
  if (problem) {
    engine.reject(std::move(done), Status(ErrorCode::invalid_argument,
                                          fmt::format("{} '{}' on rank {}: {}", pipeline.kind,
                                                      o.name, engine.rank(), *problem)));
    return;
  }
  if (o.count == 0) {
    engine.reject(std::move(done), Status{});
    return;
  }
  auto st = std::make_shared<PipelineState>();
  st->engine = &engine;
  st->staging = &staging;
  st->p = std::move(pipeline);
  st->done = std::move(done);
  if (st->p.down == nullptr) st->p.down = &staging.down();
  if (st->p.up == nullptr) st->p.up = &staging.up();
  if (st->p.sequencer == nullptr) st->p.sequencer = &st->own_sequencer;
  st->elem = dtype_size(o.dtype);
  const std::size_t piece_bytes = st->p.piece_bytes > 0 ? st->p.piece_bytes : staging.piece_bytes;
  st->piece_count = std::max<std::size_t>(piece_bytes / st->elem, 1);
  st->pieces = (o.count + st->piece_count - 1) / st->piece_count;
  if (st->p.stage) {
    void* host = nullptr;
    if (Status s = staging.pool().acquire(o.count * st->elem, &host); !s.ok()) {
      engine.reject(std::move(st->done),
                    device_op_error(st->p.kind, st->p.op.name, engine.rank(), s));
      return;
    }
    st->host = static_cast<std::byte*>(host);
  }
  st->start();
}

void staged_allreduce(Engine& engine, DeviceStaging& staging, DeviceAllreduceOptions options,
                      std::shared_ptr<const CompiledStrategy> strategy, DoneCallback done) {
  DevicePipeline p;
  const ReduceOp op = options.op;
  const Duration timeout = options.timeout;
  p.op = std::move(options);
  p.piece_bytes = staging.piece_bytes;
  p.host_collective = [op, timeout, strategy](Engine& e, const std::string& name, BufferView host,
                                              DoneCallback d) {
    allreduce(e,
              {.name = name,
               .input = host,
               .output = host,
               .op = op,
               .strategy = strategy,
               .timeout = timeout},
              std::move(d));
  };
  run_device_pipeline(engine, staging, std::move(p), std::move(done));
}

}  // namespace kf
