// Message: what the runtime hands a Transport. The header is small and fixed in meaning; the
// payload is either real bytes or, for large simulations, a phantom: a byte count that costs wire
// time in the simulated world but carries no data. C++17: included by world glue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace kf {

enum class MessageKind : std::uint8_t {
  collective = 0,    // one piece of a named collective: matched by (source, name, chunk, step)
  p2p_request = 1,   // "send me blob `name` at version `tag`" (tag 0 = latest)
  p2p_response = 2,  // the reply; flags say whether the blob was found
  ping = 3,          // "answer at once": latency probes for monitoring (tag = probe id)
  pong = 4,          // the answer, same name and tag
};

inline constexpr std::uint32_t kFlagNotFound = 1u << 0;

struct MessageHeader {
  MessageKind kind = MessageKind::collective;
  std::uint32_t flags = 0;
  std::string name;           // collective name, or blob name for p2p
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
// copied into), and zero-filling it first would be one more pass over every byte moved.
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}  // NOLINT: rebinding
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

class Payload {
 public:
  Payload() = default;
  explicit Payload(PayloadBytes bytes) : bytes_(std::move(bytes)) {}
  explicit Payload(const std::vector<std::byte>& bytes) : bytes_(bytes.begin(), bytes.end()) {}
  static Payload copy_of(const std::byte* data, std::size_t size) {
    return Payload(PayloadBytes(data, data + size));
  }
  static Payload phantom(std::size_t size) {
    Payload p;
    p.phantom_size_ = size;
    return p;
  }

  bool is_phantom() const { return phantom_size_ != 0; }
  std::size_t size() const { return is_phantom() ? phantom_size_ : bytes_.size(); }
  const std::byte* data() const { return bytes_.data(); }
  std::byte* data() { return bytes_.data(); }
  PayloadBytes& bytes() { return bytes_; }

 private:
  PayloadBytes bytes_;
  std::size_t phantom_size_ = 0;
};

struct Message {
  MessageHeader header;
  Payload payload;
};

}  // namespace kf
