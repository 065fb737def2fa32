#include "launch/peer.h"

#include <fmt/format.h>

#include <cstdlib>
#include <thread>

#include "real/epoll_loop.h"
#include "runtime/collectives.h"

namespace kf {

std::optional<Status> Handle::wait_for(Duration limit) const {
  if (future_.wait_for(limit) != std::future_status::ready) return std::nullopt;
  return future_.get();
}

struct Peer::Impl {
  WorkerConfig config;
  PeerOptions options;
  EpollLoop loop;
  std::unique_ptr<SocketTransport> transport;  // loop thread only
  std::unique_ptr<Engine> engine;              // loop thread only
  std::uint64_t serial = 0;                    // automatic names, caller side

  // Starts `start(engine, done)` on the loop; the handle completes with `done`'s status.
  Handle launch(std::function<void(Engine&, DoneCallback)> start) {
    auto promise = std::make_shared<std::promise<Status>>();
    Handle h(promise->get_future().share());
    loop.post([this, promise, start = std::move(start)] {
      if (!engine) {
        promise->set_value(Status(ErrorCode::cancelled, "peer is shutting down"));
        return;
      }
      start(*engine, [promise](Status s) { promise->set_value(std::move(s)); });
    });
    return h;
  }
};

Peer Peer::from_env(PeerOptions options) {
  return Peer(worker_config_from(current_environment()), std::move(options));
}

Peer::Peer(WorkerConfig config, PeerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& p = *impl_;
  p.config = std::move(config);
  p.options = std::move(options);
  if (p.options.transport.secret.empty()) {
    if (const char* s = std::getenv("KUNGFU_SECRET")) p.options.transport.secret = s;
  }
  if (p.config.strategy) p.options.engine.strategy = *p.config.strategy;
  try {
    p.loop.call([&] {
      p.transport = std::make_unique<SocketTransport>(p.loop, p.config.cluster, p.config.rank,
                                                      p.options.transport);
      if (p.config.cluster.size() > 1) p.transport->start();  // throws if the port is taken
      p.engine = std::make_unique<Engine>(p.config.cluster, p.config.rank, p.loop, *p.transport,
                                          p.options.engine);
    });
  } catch (...) {
    p.loop.call([&] { p.transport.reset(); });  // on its own thread, before the loop goes
    throw;
  }
  if (p.options.wait_for_peers && p.config.cluster.size() > 1) {
    // Bounded: after the connect timeout the transport reports the missing peers as lost. A peer
    // lost meanwhile ends the wait: the first collective then reports it.
    const auto deadline = std::chrono::steady_clock::now() + p.options.transport.connect_timeout +
                          std::chrono::seconds(1);
    while (!p.loop.call([&] { return p.transport->connecting_settled(); }) &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
}

Peer::Peer(Peer&&) noexcept = default;
Peer& Peer::operator=(Peer&&) noexcept = default;

Peer::~Peer() {
  if (!impl_) return;
  Impl& p = *impl_;
  p.loop.call([&] { p.engine.reset(); });
  std::promise<void> closed;
  auto closed_future = closed.get_future();
  p.loop.call(
      [&] { p.transport->shutdown(p.options.shutdown_limit, [&closed] { closed.set_value(); }); });
  closed_future.wait_for(p.options.shutdown_limit + std::chrono::seconds(1));
  p.loop.call([&] { p.transport.reset(); });
  p.loop.stop();
}

int Peer::rank() const {
  return impl_->config.rank;
}
int Peer::size() const {
  return impl_->config.cluster.size();
}
int Peer::local_rank() const {
  return impl_->config.cluster.local_rank(impl_->config.rank);
}
const ClusterSpec& Peer::cluster() const {
  return impl_->config.cluster;
}
const WorkerConfig& Peer::config() const {
  return impl_->config;
}

std::string Peer::next_name(const char* kind, std::string name) {
  if (!name.empty()) return name;
  return fmt::format("kf.{}.{}", kind, ++impl_->serial);
}

Handle Peer::allreduce_async(ConstBufferView input, BufferView output, ReduceOp op,
                             std::string name) {
  return impl_->launch([=, name = next_name("allreduce", std::move(name))](Engine& e,
                                                                           DoneCallback done) {
    kf::allreduce(e, {.name = name, .input = input, .output = output, .op = op}, std::move(done));
  });
}

Handle Peer::broadcast_async(BufferView data, int root, std::string name) {
  return impl_->launch([=, name = next_name("broadcast", std::move(name))](Engine& e,
                                                                           DoneCallback done) {
    kf::broadcast(e, {.name = name, .input = data, .output = data, .root = root}, std::move(done));
  });
}

Handle Peer::reduce_async(ConstBufferView input, BufferView output, ReduceOp op, int root,
                          std::string name) {
  return impl_->launch(
      [=, name = next_name("reduce", std::move(name))](Engine& e, DoneCallback done) {
        kf::reduce(e, {.name = name, .input = input, .output = output, .op = op, .root = root},
                   std::move(done));
      });
}

Handle Peer::allgather_async(ConstBufferView input, BufferView output, std::string name) {
  return impl_->launch(
      [=, name = next_name("allgather", std::move(name))](Engine& e, DoneCallback done) {
        kf::allgather(e, {.name = name, .input = input, .output = output}, std::move(done));
      });
}

Handle Peer::gather_async(ConstBufferView input, BufferView output, int root, std::string name) {
  return impl_->launch([=, name = next_name("gather", std::move(name))](Engine& e,
                                                                        DoneCallback done) {
    kf::gather(e, {.name = name, .input = input, .output = output, .root = root}, std::move(done));
  });
}

Handle Peer::barrier_async(std::string name) {
  return impl_->launch(
      [name = next_name("barrier", std::move(name))](Engine& e, DoneCallback done) {
        kf::barrier(e, name, std::move(done));
      });
}

Handle Peer::consensus_async(ConstBufferView bytes, std::shared_ptr<bool> agreed,
                             std::string name) {
  return impl_->launch(
      [=, name = next_name("consensus", std::move(name))](Engine& e, DoneCallback done) {
        kf::consensus(e, name, bytes, [agreed, done = std::move(done)](Status s, bool ok) {
          if (agreed) *agreed = s.ok() && ok;
          done(std::move(s));
        });
      });
}

Status Peer::consensus(ConstBufferView bytes, bool* agreed, std::string name) {
  auto result = std::make_shared<bool>(false);
  Status s = consensus_async(bytes, result, std::move(name)).wait();
  if (agreed != nullptr) *agreed = *result;
  return s;
}

std::uint64_t Peer::save(const std::string& name, ConstBufferView bytes,
                         std::optional<std::uint64_t> version) {
  Impl& p = *impl_;
  return p.loop.call([&] { return p.engine ? save_blob(*p.engine, name, bytes, version) : 0; });
}

Handle Peer::request_async(int peer, std::string name, std::shared_ptr<Blob> out,
                           std::uint64_t version) {
  return impl_->launch([=](Engine& e, DoneCallback done) {
    request_blob(e, {.peer = peer, .name = name, .version = version},
                 [out, done = std::move(done)](Status s, Blob blob) {
                   if (out) *out = std::move(blob);
                   done(std::move(s));
                 });
  });
}

Status Peer::request(int peer, std::string name, Blob* out, std::uint64_t version) {
  auto blob = std::make_shared<Blob>();
  Status s = request_async(peer, std::move(name), blob, version).wait();
  if (out != nullptr) *out = std::move(*blob);
  return s;
}

void Peer::post(std::function<void(Engine&)> fn) {
  Impl& p = *impl_;
  p.loop.post([&p, fn = std::move(fn)] {
    if (p.engine) fn(*p.engine);
  });
}

SocketTransportStats Peer::transport_stats() const {
  Impl& p = *impl_;
  return p.loop.call([&] { return p.transport->stats(); });
}

}  // namespace kf
