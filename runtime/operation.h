// Operation: one in-flight named collective (or p2p request) on one peer. The engine owns it,
// feeds it the messages it accepts, and completes it exactly once: on success, on a timeout, or
// when a peer is lost. Operations never block; they react to start() and on_message().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "runtime/buffer.h"
#include "runtime/message.h"
#include "runtime/status.h"
#include "runtime/time.h"

namespace kf {

class Engine;

using DoneCallback = std::function<void(Status)>;

// A DoneCallback that only records the status where a waiting thread looks for it (a blocking
// call's own, kf::Peer): it calls nothing and touches nothing else, so the engine fills it in
// place, even from inside start() or a message's delivery, where it posts any other callback.
// Two pointers: held inside the std::function, not allocated.
struct StatusSlot {
  Status* status;
  std::atomic<bool>* done;
  void operator()(Status s) const {
    *status = std::move(s);
    done->store(true, std::memory_order_release);
  }
};

// Pieces of an operation's buffers sent without a copy (Payload::borrowed) that the transport
// still holds. The engine completes the operation only once every piece is back.
struct Loans {
  std::size_t out = 0;
  std::function<void()> on_back;  // runs when `out` drops to zero
};

class Operation {
 public:
  Operation(Engine& engine, std::string name, std::string_view kind, DoneCallback done)
      : engine_(engine), name_(std::move(name)), kind_(kind), done_callback_(std::move(done)) {}
  virtual ~Operation() { close_landings(); }
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  const std::string& name() const { return name_; }
  std::string_view kind() const { return kind_; }
  bool done() const { return done_; }
  const Status& result() const { return result_; }

  // Sends what can be sent before anything arrives. May finish the operation.
  virtual void start() = 0;
  // True when this instance of the operation expects this message and has not had it yet. A
  // message it does not accept waits in the engine's mailbox for a later operation of that name.
  virtual bool accepts(int source, const MessageHeader& header) const = 0;
  virtual void on_message(int source, Message&& message) = 0;
  // For timeout errors: what is still missing, e.g. "chunk 3 step 1 from rank 2".
  virtual std::string waiting_for() const = 0;
  // Asked only for a message it accepts now: the bytes of its buffers that message's payload
  // would be copied into, whole, by on_message, and that nothing reads or writes until then. The
  // transport may receive the payload straight there (Transport::Handlers::landing) and hand it
  // over placed (Payload::placed), so on_message finds it in place. Empty (the default): none.
  virtual std::span<std::byte> landing(int source, const MessageHeader& header) {
    (void)source;
    (void)header;
    return {};
  }

  // The lease under which the transport writes into landing()'s bytes; open until the operation
  // finishes, fails or goes.
  std::shared_ptr<LandingLease> landing_lease() {
    if (!lease_) lease_ = std::make_shared<LandingLease>();
    return lease_;
  }
  void close_landings() {
    if (!lease_) return;
    lease_->open = false;
    lease_.reset();
  }

  // Borrowed pieces still out (see Loans), and their owner's key for Transport::reclaim.
  std::size_t lent() const { return loans_ ? loans_->out : 0; }
  const void* lender() const { return loans_.get(); }
  std::shared_ptr<Loans>& loans() {
    if (!loans_) loans_ = std::make_shared<Loans>();
    return loans_;
  }

  // The deadline for this operation; zero means the engine's default.
  Duration timeout{0};

  // Engine-side bookkeeping.
  std::uint64_t serial = 0;
  std::uint64_t timer = 0;
  TimePoint deadline{};  // start + timeout: bounds the whole operation, its loans included
  DoneCallback take_callback() { return std::move(done_callback_); }

 protected:
  Engine& engine() const { return engine_; }
  // Sends piece (chunk, step) of this collective carrying `data`: borrowed from the buffer when
  // the transport takes it so (the buffer must then stay unchanged until the peer is done with
  // it, which every algorithm's data flow ensures), copied otherwise. SendAs::copy always copies,
  // for an algorithm that changes the buffer while the piece may still be on its way. `flags`
  // describe the piece to the transport (kFlagRingPart).
  enum class SendAs : std::uint8_t { borrowed_if_large, copy };
  void send(int destination, std::size_t chunk, std::uint32_t step, ConstBufferView data,
            SendAs as = SendAs::borrowed_if_large, std::uint32_t flags = 0);
  void finish(Status status = {}) {
    if (done_) return;
    done_ = true;
    result_ = std::move(status);
    close_landings();
  }

 private:
  Engine& engine_;
  std::string name_;
  std::string_view kind_;
  DoneCallback done_callback_;
  bool done_ = false;
  Status result_;
  std::shared_ptr<Loans> loans_;
  std::shared_ptr<LandingLease> lease_;
};

}  // namespace kf
