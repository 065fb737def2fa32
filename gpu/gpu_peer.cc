// GpuPeer: blocking device collectives over a kf::Peer. Built with and without CUDA: it only
// uses the GpuContext interface (the stub's open() throws "built without CUDA").
#include <fmt/format.h>

#include <future>
#include <stdexcept>

#include "gpu/gpu.h"
#include "launch/peer.h"

namespace kf {

namespace {

// Runs `start(engine, done)` on the peer's loop and waits for `done`.
Status run_on_loop(Peer& peer, std::function<void(Engine&, DoneCallback)> start) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  peer.post([promise, start = std::move(start)](Engine& e) {
    start(e, [promise](Status s) { promise->set_value(std::move(s)); });
  });
  return future.get();
}

}  // namespace

GpuPeer::GpuPeer(Peer& peer, GpuOptions options) : peer_(peer) {
  if (auto why = gpu_unavailable()) throw std::runtime_error(*why);
  ordinal_ = options.device >= 0 ? options.device : gpu_default_device(peer.local_rank());
  context_ = GpuContext::open(ordinal_, std::move(options));
}

GpuPeer::~GpuPeer() {
  if (!context_) return;
  // The context's communicators and streams go on the loop, where they were used.
  std::promise<void> gone;
  auto future = gone.get_future();
  GpuContext* c = context_.get();
  peer_.post([c, &gone](Engine&) {
    c->shutdown();
    gone.set_value();
  });
  future.wait();
  context_.reset();
}

Device& GpuPeer::device() {
  return context_->device();
}

int GpuPeer::device_ordinal() const {
  return ordinal_;
}

const DeviceStrategy& GpuPeer::strategy() const {
  return context_->options().strategy;
}

Status GpuPeer::prepare() {
  GpuContext* c = context_.get();
  const DevicePath path = c->options().strategy.path;
  return run_on_loop(
      peer_, [c, path](Engine& e, DoneCallback done) { c->prepare(e, path, std::move(done)); });
}

Status GpuPeer::allreduce(const void* input, void* output, std::size_t count, DType dtype,
                          ReduceOp op, std::string name) {
  if (name.empty()) name = fmt::format("kf.device_allreduce.{}", ++serial_);
  GpuContext* c = context_.get();
  return run_on_loop(peer_, [=](Engine& e, DoneCallback done) {
    c->allreduce(
        e,
        {.name = name, .input = input, .output = output, .count = count, .dtype = dtype, .op = op},
        std::move(done));
  });
}

std::vector<std::string> GpuPeer::communicators() {
  GpuContext* c = context_.get();
  std::promise<std::vector<std::string>> p;
  auto f = p.get_future();
  peer_.post([c, &p](Engine&) { p.set_value(c->communicators()); });
  return f.get();
}

}  // namespace kf
