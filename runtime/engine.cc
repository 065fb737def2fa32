#include "runtime/engine.h"

#include <fmt/format.h>

#include <algorithm>

#include <stdexcept>
#include <utility>
#include <vector>

#include "topology/forest.h"

namespace kf {

Engine::Engine(ClusterSpec cluster, int rank, Executor& executor, Transport& transport,
               EngineOptions options)
    : transport_(transport),
      version_(cluster.version()),
      size_(cluster.size()),
      spans_hosts_(std::ranges::any_of(cluster.host_of(), [](int h) { return h != 0; })),
      rank_(rank),
      cluster_(std::move(cluster)),
      executor_(executor),
      options_(options) {
  if (const auto problem = cluster_.problem()) {
    throw std::invalid_argument("engine: bad cluster: " + *problem);
  }
  if (rank_ < 0 || rank_ >= cluster_.size()) {
    throw std::invalid_argument(
        fmt::format("engine: rank {} outside a cluster of {}", rank_, cluster_.size()));
  }
  if (options_.chunk_bytes == 0) throw std::invalid_argument("engine: chunk_bytes must be > 0");
  if (options_.timeout <= Duration::zero()) {
    throw std::invalid_argument("engine: timeout must be positive");
  }
  set_strategy(shared_strategy(options_.strategy, cluster_.host_of()));
  transport_.set_handlers({
      .on_message = [this](int source, Message&& m) { on_message(source, std::move(m)); },
      .on_peer_lost = [this](int peer, Status why) { on_peer_lost(peer, std::move(why)); },
      .remote_payloads = true,
      .landing = [this](int source, const MessageHeader& h,
                        std::size_t bytes) { return landing(source, h, bytes); },
  });
}

Engine::~Engine() {
  *alive_ = false;
  transport_.set_handlers({});
  if (hold_timer_ != 0) executor_.cancel(hold_timer_);
  last_found_ = nullptr;
  auto active = std::move(active_);
  auto lending = std::move(lending_);
  for (auto& [name, op] : active) {
    executor_.cancel(op->timer);
    reclaim(*op);
    if (auto done = op->take_callback()) {
      done(Status(ErrorCode::cancelled,
                  fmt::format("{} '{}' on rank {}: engine shut down", op->kind(), name, rank_)));
    }
  }
  for (auto& [serial, l] : lending) {
    executor_.cancel(l.op->timer);
    reclaim(*l.op);
    if (auto done = l.op->take_callback()) done(l.status);
  }
}

void Engine::set_strategy(Strategy strategy) {
  set_strategy(std::make_shared<const Strategy>(std::move(strategy)));
}

void Engine::set_strategy(std::shared_ptr<const Strategy> strategy) {
  strategy_ = compile(std::move(strategy));
  rooted_.clear();
  over_graphs_.reset();
  over_ring_.reset();
}

std::shared_ptr<const CompiledStrategy> Engine::compile(Strategy strategy) const {
  return compile(std::make_shared<const Strategy>(std::move(strategy)));
}

std::shared_ptr<const CompiledStrategy> Engine::compile(
    std::shared_ptr<const Strategy> strategy) const {
  for (const auto& pair : strategy->pairs) {
    if (pair.broadcast.size() != size()) {
      throw GraphError(fmt::format("strategy {} has {} nodes, the cluster has {} workers",
                                   strategy->name, pair.broadcast.size(), size()));
    }
  }
  return std::make_shared<const CompiledStrategy>(std::move(strategy), rank_);
}

std::shared_ptr<const CompiledStrategy> Engine::rooted(int root) {
  auto& cached = rooted_[root];
  if (!cached) {
    const Strategy& current = strategy_->strategy();
    Strategy s{.name = fmt::format("{}@{}", current.name, root),
               .algorithm = Algorithm::graph_pairs,
               .pairs = {rerooted(current.pairs.front(), root)}};
    cached = compile(std::move(s));
  }
  return cached;
}

std::shared_ptr<const CompiledStrategy> Engine::with_algorithm(
    const std::shared_ptr<const CompiledStrategy>& strategy, Algorithm algorithm,
    std::shared_ptr<const CompiledStrategy>& cached) {
  const bool current = strategy == strategy_;
  if (current && cached) return cached;
  // Same name and graphs (records still name the strategy), one copy for all engines.
  auto compiled = compile(shared_with_algorithm(strategy->shared_strategy(), algorithm));
  if (current) cached = compiled;
  return compiled;
}

std::shared_ptr<const CompiledStrategy> Engine::over_graphs(
    const std::shared_ptr<const CompiledStrategy>& strategy) {
  return with_algorithm(strategy, Algorithm::graph_pairs, over_graphs_);
}

std::shared_ptr<const CompiledStrategy> Engine::over_ring(
    const std::shared_ptr<const CompiledStrategy>& strategy) {
  return with_algorithm(
      strategy, spans_hosts_ ? Algorithm::ring_rs_ag_bidir : Algorithm::ring_rs_ag, over_ring_);
}

std::string Engine::describe_peer(int rank) const {
  if (rank < 0 || rank >= size()) return fmt::format("rank {}", rank);
  return fmt::format("rank {} ({})", rank, cluster_.worker(rank).to_string());
}

std::size_t Engine::mailbox_size() const {
  std::size_t n = 0;
  for (const auto& [name, queue] : mailbox_)
    n += queue.size();
  return n;
}

void Engine::reject(DoneCallback done, Status status) {
  if (const StatusSlot* slot = done.target<StatusSlot>()) {
    (*slot)(std::move(status));  // a waiting caller's: no task to post, no hop to run it
    return;
  }
  executor_.post([done = std::move(done), status = std::move(status)] { done(status); });
}

void Engine::start(std::unique_ptr<Operation> op) {
  const std::string& name = op->name();  // op's own: valid while op lives, here or in active_
  if (active_.contains(name)) {
    reject(op->take_callback(),
           Status(ErrorCode::invalid_argument,
                  fmt::format("{} '{}': a collective of that name is already in flight on rank {}",
                              op->kind(), name, rank_)));
    return;
  }
  if (!lost_peers_.empty()) {
    const auto& [peer, why] = *lost_peers_.begin();
    reject(op->take_callback(),
           Status(ErrorCode::peer_lost,
                  fmt::format("{} '{}' on rank {}: {} was lost earlier: {}", op->kind(), name,
                              rank_, describe_peer(peer), why.message())));
    return;
  }
  Operation& ref = *op;
  ref.serial = ++serials_;
  const std::uint64_t serial = ref.serial;
  const Duration timeout = ref.timeout > Duration::zero() ? ref.timeout : options_.timeout;
  ref.deadline = executor_.now() + timeout;
  // Captures no more than fit a task without an allocation. Found by serial: a timeout is rare,
  // and a scan then costs less than a name kept per operation.
  ref.timer = executor_.post_at(ref.deadline, [this, serial] {
    const auto it = std::ranges::find_if(
        active_, [serial](const auto& entry) { return entry.second->serial == serial; });
    if (it == active_.end()) return;
    const Operation& late = *it->second;
    const std::string late_name = late.name();
    fail(late_name,
         Status(ErrorCode::timeout,
                fmt::format(
                    "{} '{}' on rank {} timed out after {:.3f}s waiting for {}", late.kind(),
                    late_name, rank_,
                    to_seconds(late.timeout > Duration::zero() ? late.timeout : options_.timeout),
                    late.waiting_for())));
  });
  if (spare_active_.empty()) {
    active_.emplace(name, std::move(op));
  } else {
    auto node = std::move(spare_active_.back());
    spare_active_.pop_back();
    node.key() = name;
    node.mapped() = std::move(op);
    active_.insert(std::move(node));
  }
  ref.start();
  if (!ref.done()) deliver_stashed(ref);
  if (ref.done()) settle(ref.name());  // else its last message settles it (on_message)
}

void Engine::retire(Active::iterator it) {
  auto node = active_.extract(it);
  if (spare_active_.size() < kSpareNodes) spare_active_.push_back(std::move(node));
}

void Engine::deliver_stashed(Operation& op) {
  const auto it = mailbox_.find(op.name());
  if (it == mailbox_.end()) return;
  auto& queue = it->second;
  // Arrival order is kept: a later instance of the same name finds its messages behind these.
  for (std::size_t i = 0; i < queue.size() && !op.done();) {
    if (op.accepts(queue[i].source, queue[i].message.header)) {
      Stashed s = std::move(queue[i]);
      queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(i));
      op.on_message(s.source, std::move(s.message));
    } else {
      ++i;
    }
  }
  if (queue.empty()) {
    auto node = mailbox_.extract(it);
    if (spare_mailbox_.size() < kSpareNodes) spare_mailbox_.push_back(std::move(node));
  }
}

void Engine::settle(const std::string& name) {
  const auto it = active_.find(name);
  if (it == active_.end() || !it->second->done()) return;
  std::unique_ptr<Operation> op = std::move(it->second);
  retire(it);
  if (last_found_ == op.get()) last_found_ = nullptr;
  executor_.cancel(op->timer);
  Status status = op->result();
  complete(std::move(op), std::move(status));
}

void Engine::fail(const std::string& name, Status status) {
  const auto it = active_.find(name);
  if (it == active_.end()) return;
  std::unique_ptr<Operation> op = std::move(it->second);
  retire(it);
  if (last_found_ == op.get()) last_found_ = nullptr;
  executor_.cancel(op->timer);
  complete(std::move(op), std::move(status));
}

void Engine::complete(std::unique_ptr<Operation> op, Status status) {
  op->close_landings();  // failed without finishing, say: its late payloads are not written
  if (op->lent() == 0) {
    reject(op->take_callback(), std::move(status));
    return;
  }
  // Pieces of its buffers are still out: it completes once the transport gives them back
  // (written, or copied by the peer). A failed operation waits too, so peers still reading them
  // get the real values and fail, if they must, with their own reason.
  const std::uint64_t serial = op->serial;
  op->loans()->on_back = [this, alive = alive_, serial] {
    // Posted: the transport drops the last piece from inside its own calls.
    executor_.post([this, alive, serial] {
      if (*alive) returned(serial);
    });
  };
  // Bounded by the operation's own deadline, not a fresh one: pieces a peer has not taken by
  // then are taken back. (A stopped peer then costs the caller one timeout, not two.)
  const Duration limit = std::max(Duration::zero(), op->deadline - executor_.now());
  op->timer = executor_.post_after(limit, [this, serial] {
    const auto it = lending_.find(serial);
    if (it == lending_.end()) return;
    Lending late = std::move(it->second);
    lending_.erase(it);
    late.op->loans()->on_back = nullptr;
    // A live peer copies what is lent to it within remote_hold even before its own operation
    // starts; one that has not read it by the deadline has stopped or hangs. It is lost from now
    // on, so pending and later operations fail at once instead of after another timeout. (The
    // late operation's own result stands: its part is done.)
    for (const int peer : reclaim(*late.op)) {
      on_peer_lost(peer,
                   Status(ErrorCode::peer_lost,
                          fmt::format("{} did not read what {} '{}' lent to it within the "
                                      "operation's deadline (stopped or hung)",
                                      describe_peer(peer), late.op->kind(), late.op->name())));
    }
    if (auto done = late.op->take_callback()) done(std::move(late.status));
  });
  lending_.emplace(serial, Lending{std::move(op), std::move(status)});
}

void Engine::returned(std::uint64_t serial) {
  const auto it = lending_.find(serial);
  if (it == lending_.end() || it->second.op->lent() > 0) return;
  Lending back = std::move(it->second);
  lending_.erase(it);
  executor_.cancel(back.op->timer);
  if (auto done = back.op->take_callback()) done(std::move(back.status));
}

std::vector<int> Engine::reclaim(Operation& op) {
  if (op.lent() == 0) return {};
  return transport_.reclaim(op.lender());
}

Payload Engine::payload_of(Operation& op, ConstBufferView data) {
  const std::size_t size = data.size_bytes();
  if (data.is_phantom()) return Payload::phantom(size);
  if (size == 0 || size < transport_.min_borrowed_bytes())
    return Payload::copy_of(data.data(), size);
  std::shared_ptr<Loans> loans = op.loans();
  ++loans->out;
  const Loans* key = loans.get();
  return Payload::borrowed(data.data(), size,
                           std::shared_ptr<const void>(key, [loans](const void*) {
                             if (--loans->out == 0 && loans->on_back) loans->on_back();
                           }));
}

void Operation::send(int destination, std::size_t chunk, std::uint32_t step, ConstBufferView data,
                     SendAs as, std::uint32_t flags) {
  Message m;
  m.header.kind = MessageKind::collective;
  m.header.flags = flags;
  m.header.name = name_;
  m.header.chunk = static_cast<std::uint32_t>(chunk);
  m.header.step = step;
  // A phantom in place, without a call: a simulation at a thousand workers sends millions.
  if (data.is_phantom()) {
    m.payload.set_phantom(data.size_bytes());
  } else if (as == SendAs::copy) {
    m.payload = Payload::copy_of(data.data(), data.size_bytes());
  } else {
    m.payload = engine_.payload_of(*this, data);
  }
  engine_.send(destination, std::move(m));
}

void Engine::send(int destination, Message&& message) {
  message.header.cluster_version = version_;
  if (destination >= 0 && destination < size())
    egress_bytes_.add(destination, message.payload.size());
  transport_.send(destination, std::move(message));
}

Operation* Engine::find_active(std::string_view name) {
  if (last_found_ != nullptr && last_found_->name() == name) return last_found_;
  const auto it = active_.find(name);
  if (it == active_.end()) return nullptr;
  return last_found_ = it->second.get();
}

Landing Engine::landing(int source, const MessageHeader& header, std::size_t payload_bytes) {
  if (header.kind != MessageKind::collective ||
      (header.cluster_version != 0 && header.cluster_version != version_)) {
    return {};
  }
  Operation* op = find_active(header.name);
  if (op == nullptr || op->done() || !op->accepts(source, header)) return {};
  const std::span<std::byte> at = op->landing(source, header);
  if (at.size() != payload_bytes) return {};  // the wrong size: on_message reports it
  return {.at = at.data(), .size = at.size(), .lease = op->landing_lease()};
}

void Engine::on_message(int source, Message&& message) {
  if (message.payload.is_placed()) {
    // Received into its operation's buffer: only that operation may take it, and only while it
    // runs. One that has ended leaves it unread, as a message it no longer waits for.
    Operation* found = find_active(message.header.name);
    if (message.payload.placed_but_closed() || found == nullptr ||
        !found->accepts(source, message.header)) {
      ++late_placed_messages_;
      return;
    }
  }
  const std::uint64_t version = message.header.cluster_version;
  if (version != 0 && version < version_) {
    ++stale_messages_;
    return;
  }
  if (version > version_) {
    message.payload.materialize();  // kept for a successor: the lender gets its buffer back now
    newer_.emplace_back(source, std::move(message));
    return;
  }
  if (source >= 0 && source < size()) ingress_bytes_.add(source, message.payload.size());
  if (message.header.kind == MessageKind::p2p_request) {
    on_p2p_request(source, std::move(message));
    return;
  }
  if (message.header.kind == MessageKind::ping) {
    Message pong;
    pong.header = message.header;
    pong.header.kind = MessageKind::pong;
    send(source, std::move(pong));
    return;
  }
  if (Operation* found = find_active(message.header.name);
      found != nullptr && found->accepts(source, message.header)) {
    Operation& op = *found;
    op.on_message(source, std::move(message));
    // A second lookup once per operation, not per message. settle() reads the name only to find
    // the operation, before it lets go of it.
    if (op.done()) settle(op.name());
    return;
  }
  // Early: its operation has not started here yet (or this is the next instance of the name).
  // A kept node's key takes the name into the room its last name left, so a steady run copies
  // it without allocating.
  const bool remote = message.payload.is_remote();
  const std::string_view name = message.header.name;
  auto queue = mailbox_.find(name);
  if (queue == mailbox_.end()) {
    if (spare_mailbox_.empty()) {
      queue = mailbox_.try_emplace(std::string(name)).first;
    } else {
      auto node = std::move(spare_mailbox_.back());
      spare_mailbox_.pop_back();
      node.key().assign(name);
      queue = mailbox_.insert(std::move(node)).position;
    }
  }
  queue->second.push_back({source, std::move(message), executor_.now()});
  if (remote) arm_hold_timer();
}

void Engine::arm_hold_timer() {
  if (hold_timer_ != 0) return;
  hold_timer_ = executor_.post_after(options_.remote_hold, [this, alive = alive_] {
    if (!*alive) return;
    hold_timer_ = 0;
    materialize_held();
  });
}

void Engine::materialize_held() {
  const TimePoint now = executor_.now();
  bool more = false;
  for (auto& [name, queue] : mailbox_) {
    for (auto& s : queue) {
      if (!s.message.payload.is_remote()) continue;
      if (now - s.at >= options_.remote_hold) {
        s.message.payload.materialize();  // if that fails, the operation taking it fails
      } else {
        more = true;
      }
    }
  }
  if (more) arm_hold_timer();
}

void Engine::on_p2p_request(int source, Message request) {
  const auto blob = blobs_.get(request.header.name.str(), request.header.version);
  Message reply;
  reply.header.kind = MessageKind::p2p_response;
  reply.header.name = fmt::format("kf.p2p/{}", request.header.tag);
  reply.header.tag = request.header.tag;
  if (blob) {
    reply.header.version = blob->version;
    reply.payload = Payload::copy_of(blob->bytes->data(), blob->bytes->size());
  } else {
    reply.header.flags = kFlagNotFound;
    reply.header.version = request.header.version;
  }
  send(source, std::move(reply));
}

void Engine::on_peer_lost(int peer, Status why) {
  lost_peers_.try_emplace(peer, why);
  std::vector<std::string> names;
  names.reserve(active_.size());
  for (const auto& [name, op] : active_)
    names.emplace_back(name);
  for (const auto& name : names) {
    const auto it = active_.find(name);
    if (it == active_.end()) continue;
    fail(name, Status(ErrorCode::peer_lost,
                      fmt::format("{} '{}' on rank {}: lost {}: {}", it->second->kind(), name,
                                  rank_, describe_peer(peer), why.message())));
  }
}

}  // namespace kf
