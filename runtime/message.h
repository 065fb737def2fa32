// Message: what the runtime hands a Transport. The header is small and fixed in meaning; the
// payload is either real bytes or, for large simulations, a phantom: a byte count that costs wire
// time in the simulated world but carries no data. C++17: included by world glue.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "runtime/message_name.h"
#include "runtime/payload_pool.h"

namespace kf {

enum class MessageKind : std::uint8_t {
  collective = 0,    // one piece of a named collective: matched by (source, name, chunk, step)
  p2p_request = 1,   // "send me blob `name` at version `tag`" (tag 0 = latest)
  p2p_response = 2,  // the reply; flags say whether the blob was found
  ping = 3,          // "answer at once": latency probes for monitoring (tag = probe id)
  pong = 4,          // the answer, same name and tag
};

inline constexpr std::uint32_t kFlagNotFound = 1u << 0;
// A collective's piece that is one part of a ring's step (runtime/ring_collective.h): one peer
// reads it, for its own next step. A transport may pass such parts by reference from a smaller
// size than other payloads (SocketTransportOptions::ring_part_lend_min_bytes).
inline constexpr std::uint32_t kFlagRingPart = 1u << 1;

struct MessageHeader {
  MessageKind kind = MessageKind::collective;
  std::uint32_t flags = 0;
  MessageName name;           // collective name, or blob name for p2p
  std::uint32_t chunk = 0;    // which chunk of the collective
  std::uint32_t step = 0;     // which algorithm step (e.g. reduce = 0 / broadcast = 1 for graphs)
  std::uint64_t tag = 0;      // p2p: request id; otherwise unused
  std::uint64_t version = 0;  // p2p: blob version asked for (0 = latest) or returned
  // The sender's cluster version (elastic membership). Not on the wire: a real connection belongs
  // to one cluster version (the handshake checks it), so frames decode with 0 = "the
  // connection's". Worlds that hand Messages over directly keep it, and the engine drops stale
  // ones and keeps newer ones for its successor.
  std::uint64_t cluster_version = 0;
};

// Leaves new elements uninitialised: a payload is always overwritten right away (received into or
// copied into), and zero-filling it first would be one more pass over every byte moved. Blocks of
// payload_pool::kMinBytes and more come from the payload pool (runtime/payload_pool.h), so that a
// steady run of collectives faults no fresh pages.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    if (n > std::size_t(-1) / sizeof(T)) throw std::bad_array_new_length();
    if (n * sizeof(T) >= payload_pool::kMinBytes)
      return static_cast<T*>(payload_pool::take(n * sizeof(T)));
    return std::allocator<T>::allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) >= payload_pool::kMinBytes) {
      payload_pool::give(p, n * sizeof(T));
    } else {
      std::allocator<T>::deallocate(p, n);
    }
  }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using PayloadBytes = std::vector<std::byte, UninitializedAllocator<std::byte>>;

// Where the bytes of a remote payload lie: another process on this host lent them instead of
// sending them (SocketTransport; InprocWorld's zero_copy mimics it). They are read on demand, so
// a reduction folds them straight from there and a copy lands them where they belong, with no
// buffer in between. Only handlers that accept remote payloads get them (Transport::Handlers::
// remote_payloads); they read and drop them on the receiving executor. Dropping the last holder
// tells the owner it may reuse them.
class PayloadSource {
 public:
  virtual ~PayloadSource() = default;
  // Copies bytes [offset, offset + size) into `into`. False: they cannot be read (error()).
  virtual bool read(std::size_t offset, std::byte* into, std::size_t size) = 0;
  // After the last read: false if the owner took the bytes back meanwhile, so what was read
  // cannot be trusted (error()).
  virtual bool verify() = 0;
  virtual std::string error() const = 0;
  // After a failed read or verify: true when the owner is gone (its process ended), so the peer
  // is lost rather than misbehaving.
  virtual bool lender_lost() const { return false; }
  // The bytes where this process can read them as they are, until the payload is dropped (a
  // shared-memory ring's, say): folded and copied straight from there. Null when they must be
  // read (read()).
  virtual const std::byte* bytes_here() const { return nullptr; }
};

// A receive an operation has posted (Operation::landing): while it is open, the transport may write
// the payload of the message the operation expects straight into the operation's buffer. The
// operation closes it when it ends; from then on nothing is written there, and a message whose
// payload was placed under it is dropped.
struct LandingLease {
  bool open = true;
};

// Where a payload may be received straight (Transport::Handlers::landing): bytes of the operation
// that will take the message, under its lease. Size 0: nowhere (received as usual).
struct Landing {
  std::byte* at = nullptr;
  std::size_t size = 0;
  std::shared_ptr<LandingLease> lease;
};

// Why a remote payload's bytes could not be read (Payload::materialize).
struct PayloadFailure {
  std::string why;
  bool lender_lost = false;  // the owner's process ended (PayloadSource::lender_lost)
};

// A message's bytes, one of:
//   own      bytes the payload holds (copied in, or received into);
//   phantom  a size and no bytes (simulations);
//   borrowed bytes someone else owns (an operation's buffer, sent without a copy): every holder
//            holds the loan, and dropping the last one tells the owner the bytes are free again;
//   remote   bytes in another process on this host, read on demand (PayloadSource);
//   placed   bytes the transport received straight into the buffer of the operation taking them,
//            under its LandingLease: they already lie where they belong.
class Payload {
 public:
  // Own bytes up to this many are held in the payload itself, not allocated: a small message
  // (a policy's vote, a barrier, an 8-byte gradient sum) then costs its sender and its receiver
  // no call into the allocator.
  static constexpr std::size_t kInlineBytes = 32;

  Payload() = default;
  explicit Payload(PayloadBytes bytes) : bytes_(std::move(bytes)) {}
  explicit Payload(const std::vector<std::byte>& bytes) : bytes_(bytes.begin(), bytes.end()) {}
  static Payload copy_of(const std::byte* data, std::size_t size) {
    Payload p;
    if (size > 0) std::memcpy(p.fill(size), data, size);
    return p;
  }
  static Payload phantom(std::size_t size) {
    Payload p;
    p.set_phantom(size);
    return p;
  }
  // Makes a fresh (default) payload phantom(size) in place.
  void set_phantom(std::size_t size) {
    if (size > 0) {
      kind_ = Kind::phantom;
      size_ = size;
    }
  }
  // Only for a Transport that takes borrowed payloads (Transport::min_borrowed_bytes): the bytes
  // must stay put and unchanged until the loan comes back.
  static Payload borrowed(const std::byte* data, std::size_t size,
                          std::shared_ptr<const void> loan) {
    return elsewhere(Kind::borrowed, data, size, std::move(loan));
  }
  // Only for a Transport writing into a landing (Transport::Handlers::landing): `size` bytes at
  // `data`, in the buffer of the operation that holds `lease`.
  static Payload placed(const std::byte* data, std::size_t size,
                        std::shared_ptr<const LandingLease> lease) {
    return elsewhere(Kind::placed, data, size, std::move(lease));
  }
  static Payload remote(std::size_t size, std::shared_ptr<PayloadSource> source) {
    Payload p;
    p.kind_ = Kind::remote;
    p.size_ = size;
    p.at_.source = source.get();
    p.holder_ = std::move(source);
    return p;
  }

  bool is_phantom() const { return kind_ == Kind::phantom; }
  bool is_borrowed() const { return kind_ == Kind::borrowed && holder_ != nullptr; }
  bool is_remote() const { return kind_ == Kind::remote && holder_ != nullptr; }
  bool is_placed() const { return kind_ == Kind::placed && holder_ != nullptr; }
  // A placed payload whose operation has ended: its bytes must not be read or trusted.
  bool placed_but_closed() const {
    return is_placed() && !static_cast<const LandingLease*>(holder_.get())->open;
  }
  // A remote payload whose bytes could not be read (materialize() failed): size, no bytes.
  bool failed() const { return kind_ == Kind::failed && holder_ != nullptr; }
  const std::string& error() const {
    static const std::string none;
    return failed() ? at_.failure->why : none;
  }
  bool lender_lost() const { return failed() && at_.failure->lender_lost; }
  std::size_t size() const {
    if (kind_ == Kind::phantom || kind_ == Kind::small) return size_;
    // A payload moved from keeps its kind but not its holder: it is empty then.
    return kind_ != Kind::own && holder_ != nullptr ? size_ : bytes_.size();
  }
  // Own, borrowed or placed bytes; a remote payload has none until materialize().
  const std::byte* data() const {
    if (kind_ == Kind::small) return small_.data();
    return is_borrowed() || is_placed() ? at_.borrowed : bytes_.data();
  }
  // Makes a fresh (default) payload own `size` bytes, left uninitialised, and returns them to be
  // filled: held inline up to kInlineBytes, allocated beyond. The bytes move with the payload
  // when they are inline, so a pointer to them lasts only until it is moved.
  std::byte* fill(std::size_t size) {
    if (size <= kInlineBytes) {
      kind_ = Kind::small;
      size_ = size;
      return small_.data();
    }
    bytes_.resize(size);
    return bytes_.data();
  }
  // The own bytes of a payload being filled (after fill()); null for the other kinds.
  std::byte* own_data() {
    if (kind_ == Kind::small) return small_.data();
    return kind_ == Kind::own ? bytes_.data() : nullptr;
  }
  // Identifies the owner of borrowed bytes (Transport::reclaim); null otherwise.
  const void* lender() const { return is_borrowed() ? holder_.get() : nullptr; }
  PayloadSource* source() const { return is_remote() ? at_.source : nullptr; }

  // Turns a remote payload into own bytes and drops the source. False if the bytes cannot be
  // read: the payload is failed() then.
  bool materialize() {
    if (!is_remote()) return !failed();
    PayloadSource& source = *at_.source;
    PayloadBytes bytes(size_);
    if (!source.read(0, bytes.data(), bytes.size()) || !source.verify()) {
      std::string why = source.error();
      if (why.empty()) why = "the lent payload could not be read";
      auto failure = std::make_shared<const PayloadFailure>(
          PayloadFailure{std::move(why), source.lender_lost()});
      kind_ = Kind::failed;
      at_.failure = failure.get();
      holder_ = std::move(failure);  // drops the source
    } else {
      *this = Payload(std::move(bytes));
    }
    return !failed();
  }
  // Turns a borrowed payload into own bytes (a copy) and returns the loan.
  void own() {
    if (!is_borrowed()) return;
    *this = copy_of(at_.borrowed, size_);
  }

 private:
  // Every message carries one, and a simulated one is moved several times on its way: the kinds
  // share their fields, so a Payload is 96 bytes (32 of them inline bytes) and a move copies them.
  //   own    bytes_ (allocated);  small  small_ (inline, size_ of them).
  enum class Kind : std::uint8_t { own, small, phantom, borrowed, remote, failed, placed };
  // Bytes at `data` that `holder` keeps (borrowed or placed).
  static Payload elsewhere(Kind kind, const std::byte* data, std::size_t size,
                           std::shared_ptr<const void> holder) {
    Payload p;
    p.kind_ = kind;
    p.size_ = size;
    p.at_.borrowed = data;
    p.holder_ = std::move(holder);
    return p;
  }

  Kind kind_ = Kind::own;
  std::size_t size_ = 0;  // small, phantom, borrowed, remote or failed
  union {
    const std::byte* borrowed;      // borrowed or placed
    PayloadSource* source;          // held by holder_
    const PayloadFailure* failure;  // held by holder_
  } at_{nullptr};
  // What keeps the rest alive: the loan (borrowed), the source (remote), the failure (failed) or
  // the lease (placed).
  std::shared_ptr<const void> holder_;
  PayloadBytes bytes_;
  std::array<std::byte, kInlineBytes> small_{};
};

struct Message {
  MessageHeader header;
  Payload payload;
};

}  // namespace kf
